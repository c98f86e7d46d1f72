"""toolvisor: an Elixir/OTP-style supervised actor runtime for LLM tool calls."""

from toolvisor._logging import configure_logging
from toolvisor.contract import (
    AskUser,
    CallContext,
    Err,
    Halt,
    InvalidArguments,
    InvalidHandlerError,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolError,
    tool,
)
from toolvisor.executor import encode, execute

__all__ = [
    "AskUser",
    "CallContext",
    "Err",
    "Halt",
    "InvalidArguments",
    "InvalidHandlerError",
    "Ok",
    "Pending",
    "Tool",
    "ToolCall",
    "ToolError",
    "configure_logging",
    "encode",
    "execute",
    "tool",
]
