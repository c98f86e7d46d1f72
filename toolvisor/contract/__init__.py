"""The plain-data contract: handler results, errors, tools, calls, context and messages."""

from toolvisor.contract._arity import handler_arity
from toolvisor.contract._context import NEVER_CANCELLED, CallContext, CancelToken, StateAccess
from toolvisor.contract._errors import (
    TOOL_ERROR_REASONS,
    InvalidArguments,
    InvalidHandlerError,
    ToolError,
    ToolErrorReason,
    Violation,
)
from toolvisor.contract._messages import (
    AssistantMessage,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from toolvisor.contract._results import (
    LEGAL_RESULT_TYPES,
    AskUser,
    Err,
    Halt,
    HandlerResult,
    Ok,
    OnCancel,
    OnTimeout,
    Pending,
)
from toolvisor.contract._tool import Handler, Isolation, Scheduling, Tool, tool

__all__ = [
    "LEGAL_RESULT_TYPES",
    "NEVER_CANCELLED",
    "TOOL_ERROR_REASONS",
    "AskUser",
    "AssistantMessage",
    "CallContext",
    "CancelToken",
    "Err",
    "Halt",
    "Handler",
    "HandlerResult",
    "InvalidArguments",
    "InvalidHandlerError",
    "Isolation",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "Ok",
    "OnCancel",
    "OnTimeout",
    "Pending",
    "Scheduling",
    "StateAccess",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolErrorReason",
    "ToolResultMessage",
    "ToolSpec",
    "UserMessage",
    "Violation",
    "handler_arity",
    "tool",
]
