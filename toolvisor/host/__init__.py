"""The run host: ``OrchestratorActor`` hosts each run's ``TurnMachine`` and performs its effects.

The ``Agent`` tells it the commands here; a run's future fails with ``OrchestratorStopped`` if
the orchestrator stops before the run ends.
"""

from toolvisor.host._commands import (
    AnswerRun,
    AttachRun,
    CancelRun,
    OrchestratorSettings,
    OrchestratorStopped,
    ProgressCallback,
    StartRun,
)
from toolvisor.host._durable_waits import PENDING_TIMEOUT_CODE, durable_call_id
from toolvisor.host._gates import ResilienceConfig, ToolGates
from toolvisor.host._leases import RunLeasedError
from toolvisor.host._model_calls import ModelAnswer, ModelCalls
from toolvisor.host._orchestrator import OrchestratorActor
from toolvisor.host._tracing import SEMCONV_VERSION, Tracing, tracing_for

__all__ = [
    "PENDING_TIMEOUT_CODE",
    "SEMCONV_VERSION",
    "AnswerRun",
    "AttachRun",
    "CancelRun",
    "ModelAnswer",
    "ModelCalls",
    "OrchestratorActor",
    "OrchestratorSettings",
    "OrchestratorStopped",
    "ProgressCallback",
    "ResilienceConfig",
    "RunLeasedError",
    "StartRun",
    "ToolGates",
    "Tracing",
    "durable_call_id",
    "tracing_for",
]
