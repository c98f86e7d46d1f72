"""The errors of the MCP layer that need no SDK."""

from __future__ import annotations

from toolvisor.contract import Err, ToolError, ToolvisorError


class McpConnectionError(ToolvisorError, ConnectionError):
    """The connection to an MCP server could not be made, or was lost: the reason its
    supervised connection exits, for its supervisor to restart it."""


def transport_closed(tool: str, call_id: str | None, why: str) -> Err:
    """The error of a call made while the server is not connected, or cut off by its loss."""
    return Err(ToolError("handler_exit",
                         f"tool error ({tool}): handler_exit: mcp_transport_closed: {why}",
                         tool_name=tool, tool_call_id=call_id, code="mcp_transport_closed"))
