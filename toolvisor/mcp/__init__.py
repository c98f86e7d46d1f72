"""Tools that live elsewhere: MCP servers as supervised tool sources (``McpToolProvider``),
and toolvisor tools served over MCP (``serve``). Needs the ``toolvisor[mcp]`` extra; the SDK
is imported only when a connection or a server starts."""

from collections.abc import Sequence
from typing import Any

from toolvisor.contract import Tool
from toolvisor.mcp._errors import McpConnectionError
from toolvisor.mcp._provider import McpConnection, McpToolProvider
from toolvisor.mcp._sdk import load


def serve(tools: Sequence[Tool], **options: Any) -> None:
    """Serve ``tools`` over MCP: stdio, or streamable HTTP with ``http=True`` (``host``,
    ``port``); each call supervised as an agent's are (``tool_timeout``, ``process_workers``,
    ``max_concurrent_calls``, ``name``)."""
    load("_serve").serve(tools, **options)


__all__ = ["McpConnection", "McpConnectionError", "McpToolProvider", "serve"]
