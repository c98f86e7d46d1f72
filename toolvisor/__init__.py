"""toolvisor: an Elixir/OTP-style supervised actor runtime for LLM tool calls."""

from toolvisor._logging import configure_logging, set_event_sink
from toolvisor.agent import Agent, RunOutcome
from toolvisor.contract import (
    AskUser,
    CallContext,
    Err,
    Halt,
    InvalidArguments,
    InvalidHandlerError,
    ModelError,
    Ok,
    Pending,
    RayActor,
    Tool,
    ToolCall,
    ToolError,
    ToolvisorError,
    tool,
)
from toolvisor.executor import encode, execute
from toolvisor.host import AlreadyResumedError, OrchestratorStopped, RunLeasedError
from toolvisor.machine import Completed, Failed, Halted, RunNotCompletedError, Suspended

__all__ = [
    "Agent",
    "AlreadyResumedError",
    "AskUser",
    "CallContext",
    "Completed",
    "Err",
    "Failed",
    "Halt",
    "Halted",
    "InvalidArguments",
    "InvalidHandlerError",
    "ModelError",
    "Ok",
    "OrchestratorStopped",
    "Pending",
    "RayActor",
    "RunLeasedError",
    "RunNotCompletedError",
    "RunOutcome",
    "Suspended",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolvisorError",
    "configure_logging",
    "encode",
    "execute",
    "set_event_sink",
    "tool",
]
