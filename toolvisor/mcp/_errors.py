"""The errors of the MCP layer that need no SDK."""

from __future__ import annotations

import asyncio

from toolvisor.contract import Err, ToolError, ToolvisorError


class McpConnectionError(ToolvisorError, ConnectionError):
    """The connection to an MCP server could not be made, or was lost: the reason its
    supervised connection exits, for its supervisor to restart it."""


def transport_closed(tool: str, call_id: str | None, why: str) -> Err:
    """The error of a call made while the server is not connected, or cut off by its loss."""
    return Err(ToolError("handler_exit",
                         f"tool error ({tool}): handler_exit: mcp_transport_closed: {why}",
                         tool_name=tool, tool_call_id=call_id, code="mcp_transport_closed"))


def session_expired(tool: str, call_id: str | None, why: str) -> Err:
    """The error of a call the server refused because it no longer knows the session (it
    never ran), when the call could not be sent again on a new session."""
    return Err(ToolError("handler_exit",
                         f"tool error ({tool}): handler_exit: mcp_session_expired: {why}; "
                         "the server did not run the call",
                         tool_name=tool, tool_call_id=call_id, code="mcp_session_expired"))


def real_cause(exc: BaseException) -> BaseException:
    """What went wrong under the task groups' ``ExceptionGroup`` wrappers: the one error a
    group holds (cancellations aside, when something else failed), else the group itself."""
    causes = _causes(exc)
    return causes[0] if len(causes) == 1 else exc


def describe(exc: BaseException) -> str:
    """``Type: message`` of the real cause (of each one, when a group holds several)."""
    return "; ".join(dict.fromkeys(f"{type(cause).__name__}: {cause}"
                                   for cause in _causes(exc)))


def _causes(exc: BaseException) -> list[BaseException]:
    leaves = _leaves(exc)
    return [leaf for leaf in leaves if not isinstance(leaf, asyncio.CancelledError)] or leaves


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
