"""What an MCP tool call comes back with, in toolvisor's terms.

``isError: true`` is the tool reporting a failure: an ``Err`` with the server's content.
Everything else that goes wrong is a crash, one ``ToolError`` of the closed set with a
``code`` saying what happened on the wire.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, CallToolResult, TextContent
from pydantic import ValidationError

from toolvisor.contract import Err, HandlerResult, Ok, ToolError


def content_value(result: CallToolResult) -> Any:
    """``structuredContent`` when the server gave one; else one text block as its text, or
    every content block as its JSON (images, audio, resources kept as the server sent them)."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if len(blocks) == 1 and isinstance(blocks[0], TextContent):
        return blocks[0].text
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


def handler_result(result: CallToolResult) -> HandlerResult:
    """``Ok(value)``, or ``Err(value)`` for a result the tool marked ``isError``."""
    value = content_value(result)
    return Err(value) if result.is_error else Ok(value)


def session_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the session is gone (transport closed, session terminated), so
    the connection must be made again."""
    if not isinstance(exc, MCPError):
        return False
    return (exc.code == CONNECTION_CLOSED and exc.message == "Connection closed") or (
        exc.code == INVALID_REQUEST and exc.message == "Session terminated")


def crash(tool: str, call_id: str | None, exc: BaseException) -> Err:
    """The ``ToolError`` for a call that failed on the wire, not in the tool."""
    reason: Any
    if session_lost(exc):
        reason, code = "handler_exit", (
            "mcp_session_terminated" if "terminated" in str(exc) else "mcp_transport_closed")
    elif isinstance(exc, MCPError):
        reason, code = "handler_raised", "mcp_protocol_error"
    elif isinstance(exc, ValidationError):
        reason, code = "handler_raised", "mcp_malformed_result"
    elif isinstance(exc, OSError | EOFError):
        reason, code = "handler_exit", "mcp_transport_closed"
    else:
        reason, code = "handler_raised", "mcp_client_error"
    detail = f"JSON-RPC error {exc.code}: {exc.message}" if isinstance(exc, MCPError) \
        else f"{type(exc).__name__}: {exc}"
    return Err(ToolError(reason, f"tool error ({tool}): {reason}: {code}: {detail}",
                         tool_name=tool, tool_call_id=call_id, cause=exc, code=code))
