"""The model calls of an agent's runs: a run's ``LlmCall`` (``ModelCalls``, ``ModelsInFlight``),
what the user is told of a model that keeps a run waiting, and a call's direct completions."""

from toolvisor.host.models._direct_completions import (
    NO_USAGE,
    CallCompletions,
    CompletionModel,
    Completions,
)
from toolvisor.host.models._model_calls import ModelCalls
from toolvisor.host.models._model_info import model_info
from toolvisor.host.models._model_notices import WaitingModels, log_machine_event
from toolvisor.host.models._model_performer import ModelPerformer
from toolvisor.host.models._models_in_flight import ModelsInFlight

__all__ = [
    "NO_USAGE",
    "CallCompletions",
    "CompletionModel",
    "Completions",
    "ModelCalls",
    "ModelPerformer",
    "ModelsInFlight",
    "WaitingModels",
    "log_machine_event",
    "model_info",
]
