"""The run host: ``OrchestratorActor`` drives each run's ``TurnMachine`` and performs its effects.

The ``Agent`` tells it the commands here; a run's future fails with ``OrchestratorStopped`` if
the orchestrator stops before the run ends, and a resume with ``AlreadyResumedError`` if its
``Suspended`` was spent (``ResumedSuspensions`` keeps that for runs without a store). Inside,
the host is rooms with a one-way import graph (``host/README.md``); this is the face other
packages use. ``ModelPerformer`` and ``ToolCallPerformer`` perform one model request and one
tool call with explicit inputs, for a host of the machine that has no orchestrator.
"""

from toolvisor.host._mail import Reply, reply_future
from toolvisor.host._protocol import (
    AlreadyResumedError,
    AnswerRun,
    AttachRun,
    CancelRun,
    ClaimRuns,
    ModelAnswer,
    OrchestratorStopped,
    ProgressCallback,
    RunLeasedError,
    StartRun,
)
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.host.calls import ResilienceConfig, ToolCallPerformer, ToolGates
from toolvisor.host.models import ModelCalls, ModelPerformer, WaitingModels, model_info
from toolvisor.host.observe import SEMCONV_VERSION, RunSpans, tracing_for
from toolvisor.host.processes import CallProcesses, HostProcesses, Processes
from toolvisor.host.run import (
    AgentTree,
    LoopReply,
    OrchestratorActor,
    OrchestratorSettings,
    ResumedSuspensions,
    refuse_child,
)
from toolvisor.host.sessions import AgentSessions, CallSessions, SessionLimits, agent_tool
from toolvisor.host.waits import PENDING_TIMEOUT_CODE, durable_call_id

__all__ = [
    "PENDING_TIMEOUT_CODE",
    "SEMCONV_VERSION",
    "AgentSessions",
    "AgentTree",
    "AlreadyResumedError",
    "AnswerRun",
    "AttachRun",
    "CallProcesses",
    "CallSessions",
    "CancelRun",
    "ClaimRuns",
    "HostProcesses",
    "LoopReply",
    "ModelAnswer",
    "ModelCalls",
    "ModelPerformer",
    "OrchestratorActor",
    "OrchestratorSettings",
    "OrchestratorStopped",
    "Processes",
    "ProgressCallback",
    "Reply",
    "ResilienceConfig",
    "ResumedSuspensions",
    "RunCatalog",
    "RunLeasedError",
    "RunSpans",
    "SessionLimits",
    "StartRun",
    "ToolCallPerformer",
    "ToolGates",
    "WaitingModels",
    "agent_tool",
    "durable_call_id",
    "model_info",
    "refuse_child",
    "reply_future",
    "tracing_for",
]
