"""The run host: ``OrchestratorActor`` hosts each run's ``TurnMachine`` and performs its effects.

The ``Agent`` tells it the commands here; a run's future fails with ``OrchestratorStopped`` if
the orchestrator stops before the run ends, and a resume with ``AlreadyResumedError`` if its
``Suspended`` was spent (``ResumedSuspensions`` keeps that for runs without a store).
"""

from toolvisor.host._commands import (
    AlreadyResumedError,
    AnswerRun,
    AttachRun,
    CancelRun,
    ClaimRuns,
    OrchestratorSettings,
    OrchestratorStopped,
    ProgressCallback,
    StartRun,
    reply_future,
)
from toolvisor.host._durable_waits import PENDING_TIMEOUT_CODE, durable_call_id
from toolvisor.host._gates import ResilienceConfig, ToolGates
from toolvisor.host._leases import RunLeasedError
from toolvisor.host._model_calls import ModelAnswer, ModelCalls
from toolvisor.host._orchestrator import OrchestratorActor
from toolvisor.host._process_views import CallProcesses, HostProcesses
from toolvisor.host._processes import Processes
from toolvisor.host._resumed import ResumedSuspensions
from toolvisor.host._tracing import SEMCONV_VERSION, Tracing, tracing_for
from toolvisor.host._tree import AgentTree

__all__ = [
    "PENDING_TIMEOUT_CODE",
    "SEMCONV_VERSION",
    "AgentTree",
    "AlreadyResumedError",
    "AnswerRun",
    "AttachRun",
    "CallProcesses",
    "CancelRun",
    "ClaimRuns",
    "HostProcesses",
    "ModelAnswer",
    "ModelCalls",
    "OrchestratorActor",
    "OrchestratorSettings",
    "OrchestratorStopped",
    "Processes",
    "ProgressCallback",
    "ResilienceConfig",
    "ResumedSuspensions",
    "RunLeasedError",
    "StartRun",
    "ToolGates",
    "Tracing",
    "durable_call_id",
    "reply_future",
    "tracing_for",
]
