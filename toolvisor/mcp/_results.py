"""What an MCP tool call comes back with, in toolvisor's terms.

``isError: true`` is the tool reporting a failure: an ``Err`` with the server's content.
Everything else that goes wrong is a crash, one ``ToolError`` of the closed set with a
``code`` saying what happened on the wire.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult, TextContent
from pydantic import ValidationError

from toolvisor.contract import Err, HandlerResult, Ok, ToolError
from toolvisor.mcp._errors import describe, real_cause


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
    return Err(error_value(value)) if result.is_error else Ok(value)


def error_value(value: Any) -> Any:
    """An error the server wrote as JSON text is that JSON, so the model reads it encoded
    once, not as a string holding JSON; an encoded error's ``{"error": ...}`` (what a
    toolvisor server sends) is unwrapped, since toolvisor wraps it again."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            value = json.loads(value, parse_constant=_not_json)
        except ValueError:
            return value
    if isinstance(value, dict) and value.keys() == {"error"}:
        return value["error"]
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def session_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the transport is gone (closed, or a response stream cut off
    before its answer: the server went away), so the connection must be made again."""
    if not isinstance(exc, MCPError) or exc.code != CONNECTION_CLOSED:
        return False
    return exc.message == "Connection closed" or exc.message.startswith("SSE stream")


def crash(tool: str, call_id: str | None, exc: BaseException) -> Err:
    """The ``ToolError`` for a call that failed on the wire, not in the tool."""
    reason: Any
    cause = real_cause(exc)
    if session_lost(cause):
        reason, code = "handler_exit", "mcp_transport_closed"
    elif isinstance(cause, MCPError):
        reason, code = "handler_raised", "mcp_protocol_error"
    elif isinstance(cause, ValidationError):
        reason, code = "handler_raised", "mcp_malformed_result"
    elif isinstance(cause, OSError | EOFError):
        reason, code = "handler_exit", "mcp_transport_closed"
    else:
        reason, code = "handler_raised", "mcp_client_error"
    detail = f"JSON-RPC error {cause.code}: {cause.message}" if isinstance(cause, MCPError) \
        else describe(exc)
    return Err(ToolError(reason, f"tool error ({tool}): {reason}: {code}: {detail}",
                         tool_name=tool, tool_call_id=call_id, cause=cause, code=code))
