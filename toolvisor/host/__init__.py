"""The run host: ``OrchestratorActor`` hosts each run's ``TurnMachine`` and performs its effects.

The ``Agent`` tells it the commands here; a run's future fails with ``OrchestratorStopped`` if
the orchestrator stops before the run ends, and a resume with ``AlreadyResumedError`` if its
``Suspended`` was spent (``ResumedSuspensions`` keeps that for runs without a store).
"""

from toolvisor.host._agent_tool import agent_tool
from toolvisor.host._child_sessions import CallSessions
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
from toolvisor.host._loop_reply import LoopReply, Reply
from toolvisor.host._model_calls import ModelAnswer, ModelCalls
from toolvisor.host._model_info import model_info
from toolvisor.host._orchestrator import OrchestratorActor
from toolvisor.host._process_views import CallProcesses, HostProcesses
from toolvisor.host._processes import Processes
from toolvisor.host._resumed import ResumedSuspensions
from toolvisor.host._run_tree import refuse_child
from toolvisor.host._session_host import AgentSessionHost, SessionLimits
from toolvisor.host._tracing import SEMCONV_VERSION, Tracing, tracing_for
from toolvisor.host._tree import AgentTree

__all__ = [
    "PENDING_TIMEOUT_CODE",
    "SEMCONV_VERSION",
    "AgentSessionHost",
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
    "OrchestratorActor",
    "OrchestratorSettings",
    "OrchestratorStopped",
    "Processes",
    "ProgressCallback",
    "Reply",
    "ResilienceConfig",
    "ResumedSuspensions",
    "RunLeasedError",
    "SessionLimits",
    "StartRun",
    "ToolGates",
    "Tracing",
    "agent_tool",
    "durable_call_id",
    "model_info",
    "refuse_child",
    "reply_future",
    "tracing_for",
]
