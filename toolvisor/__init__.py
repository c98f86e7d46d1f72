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
    OpenSchemaWarning,
    Pending,
    RayActor,
    Tool,
    ToolCall,
    ToolError,
    ToolvisorError,
    function_tool,
    tool,
)
from toolvisor.executor import encode, execute
from toolvisor.host import OrchestratorStopped, RunLeasedError
from toolvisor.machine import Completed, Failed, Halted, RunNotCompletedError, Suspended

__all__ = [
    "Agent",
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
    "OpenSchemaWarning",
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
    "function_tool",
    "set_event_sink",
    "tool",
]
