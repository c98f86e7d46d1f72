"""Tools that live elsewhere: MCP servers as supervised tool sources (``McpToolProvider``),
and toolvisor tools served over MCP (``serve``). Needs the ``toolvisor[mcp]`` extra; the SDK
is imported only when a connection or a server starts."""

from toolvisor.mcp._errors import McpConnectionError
from toolvisor.mcp._provider import McpConnection, McpToolProvider

__all__ = ["McpConnection", "McpConnectionError", "McpToolProvider"]
