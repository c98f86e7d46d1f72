"""``ToolServer``: toolvisor tools served over MCP, with toolvisor's supervision behind each call.

Each ``tools/call`` is one call of a ``SupervisedCalls`` (the core the framework adapters
share): its own ``ToolCallActor`` under a ``DynamicSupervisor``, through a ``ToolRunner``, so
the tool's isolation and timeout apply (a hung ``process`` tool is killed at its deadline), and
whatever goes wrong is one reason of the closed set, sent as an ``isError`` result whose text
says it. A client's cancellation stops the call's actor. So any MCP client gets tools that
cannot hang it. A client that sent a progress token gets the tool's ``ctx.report_progress`` as
``notifications/progress`` (``_progress.py``).
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import mcp_types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from toolvisor.adapters import Finished, SupervisedCalls
from toolvisor.call import encode
from toolvisor.contract import Err, Ok, Tool, ToolError
from toolvisor.mcp._progress import McpProgress, token_of


class ToolServer:
    """An MCP server (the SDK's low-level ``Server``) offering ``tools``.

    Tools without a handler (manual ones) and internal tools are not offered. ``close()``
    stops the calls' supervisor and the runner (worker processes included).
    """

    def __init__(self, tools: Sequence[Tool], *, name: str = "toolvisor",
                 tool_timeout: float = 30.0, process_workers: int = 2,
                 max_concurrent_calls: int = 1024) -> None:
        self._calls = SupervisedCalls(
            [t for t in tools if t.handler is not None and not t.internal],
            tool_timeout=tool_timeout, process_workers=process_workers,
            max_concurrent_calls=max_concurrent_calls, supervisor_name="mcp_calls")
        self._tools = self._calls.tools
        self.server: Server[Any] = Server(name, on_list_tools=self._list_tools,
                                          on_call_tool=self._call_tool)

    async def _list_tools(self, ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=[
            mcp_types.Tool(name=t.name, description=t.description,
                           input_schema=dict(t.input_schema))
            for t in self._tools.values()])

    async def _call_tool(self, ctx: Any, params: mcp_types.CallToolRequestParams
                         ) -> mcp_types.CallToolResult:
        progress = None if token_of(getattr(ctx, "meta", None)) is None \
            else McpProgress(asyncio.get_running_loop(), ctx.session.report_progress)
        # a client's cancellation cancels this task, which stops the call's actor
        done = await self._calls.arun(params.name, params.arguments or {}, uuid.uuid4().hex,
                                      progress=progress)
        if progress is not None:  # the reports the call made reach the client before its result
            await progress.flush()
        return mcp_result(done)

    def close(self) -> None:
        """Stop the calls' supervisor, then the actors' threads and the runner. Idempotent."""
        self._calls.close()

    async def serve_stdio(self) -> None:
        """Serve on stdin and stdout until the client closes them."""
        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    async def serve_http(self, host: str, port: int,
                         on_listening: Callable[[str], None] | None = None) -> None:
        """Serve streamable HTTP on ``host:port`` (``0``: a free port); ``on_listening``
        gets the endpoint's URL once the socket listens (a client may connect at once: the
        connection waits in the backlog until the server accepts it)."""
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        # Connections this server closed wait in TIME_WAIT for a minute: without this, a
        # restarted server could not listen on its port meanwhile (as uvicorn's own bind).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
        url = f"http://{host}:{sock.getsockname()[1]}/mcp"
        if on_listening is not None:
            on_listening(url)
        config = uvicorn.Config(self.server.streamable_http_app(host=host), log_level="warning")
        await uvicorn.Server(config).serve(sockets=[sock])


def mcp_result(reply: Finished) -> mcp_types.CallToolResult:
    """A call's outcome as MCP sees it: ``Ok`` is a result (a dict value also as structured
    content); anything else (a reported ``Err``, a ``ToolError``, a result only an agent loop
    can act on) is an ``isError`` result whose text is the encoded error, reason first."""
    result = reply.result
    if isinstance(result, Ok):
        structured = result.value if isinstance(result.value, dict) else None
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=reply.text)],
            structured_content=structured)
    if isinstance(result, Err):
        return _error(reply.text)
    return _error(ToolError(
        "invalid_return", f"tool error ({reply.tool_name}): invalid_return: the tool returned "
        f"{type(result).__name__}, which only a toolvisor agent can act on: {reply.text}",
        tool_name=reply.tool_name, tool_call_id=reply.tool_call_id))


def _error(error: str | ToolError) -> mcp_types.CallToolResult:
    """An ``isError`` result: the encoded error text, or the encoding of ``error``."""
    text = error if isinstance(error, str) else encode(Err(error))
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)],
                                    is_error=True)


def serve(tools: Sequence[Tool], *, http: bool = False, host: str = "127.0.0.1",
          port: int = 8000, on_listening: Callable[[str], None] | None = None,
          **settings: Any) -> None:
    """Serve ``tools`` over MCP until the client goes away (stdio) or the process is
    stopped (HTTP); ``settings`` go to :class:`ToolServer`."""
    server = ToolServer(tools, **settings)
    try:
        if http:
            anyio.run(server.serve_http, host, port, on_listening)
        else:
            anyio.run(server.serve_stdio)
    finally:
        server.close()
