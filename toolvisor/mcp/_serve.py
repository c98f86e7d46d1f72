"""``ToolServer``: toolvisor tools served over MCP, with toolvisor's supervision behind each call.

Each ``tools/call`` runs in its own ``ToolCallActor`` under a ``DynamicSupervisor``, through a
``ToolRunner``: the tool's isolation and timeout apply (a hung ``process`` tool is killed at its
deadline), and whatever goes wrong is one reason of the closed set, sent as an ``isError``
result whose text says it. A client's cancellation stops the call's actor. So any MCP client
gets tools that cannot hang it. A client that sent a progress token gets the tool's
``ctx.report_progress`` as ``notifications/progress`` (``_progress.py``).
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

from toolvisor.actors import CallReply, ToolCallDispatcher
from toolvisor.call import encode
from toolvisor.contract import CallContext, Err, Ok, Tool, ToolCall, ToolError
from toolvisor.executor import ToolRunner
from toolvisor.mcp._progress import McpProgress, token_of
from toolvisor.supervisors import DynamicSupervisor


class ToolServer:
    """An MCP server (the SDK's low-level ``Server``) offering ``tools``.

    Tools without a handler (manual ones) and internal tools are not offered. ``close()``
    stops the calls' supervisor and the runner (worker processes included).
    """

    def __init__(self, tools: Sequence[Tool], *, name: str = "toolvisor",
                 tool_timeout: float = 30.0, process_workers: int = 2,
                 max_concurrent_calls: int = 1024) -> None:
        self._tools = {t.name: t for t in tools if t.handler is not None and not t.internal}
        self._runner = ToolRunner(tool_timeout=tool_timeout, process_workers=process_workers)
        self._calls = DynamicSupervisor.start(max_children=max_concurrent_calls,
                                               name="mcp_calls")
        self._dispatcher = ToolCallDispatcher(self._calls, self._runner)
        self.server: Server[Any] = Server(name, on_list_tools=self._list_tools,
                                          on_call_tool=self._call_tool)

    async def _list_tools(self, ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=[
            mcp_types.Tool(name=t.name, description=t.description,
                           input_schema=dict(t.input_schema))
            for t in self._tools.values()])

    async def _call_tool(self, ctx: Any, params: mcp_types.CallToolRequestParams
                         ) -> mcp_types.CallToolResult:
        tool = self._tools.get(params.name)
        if tool is None:
            return _error(ToolError("not_found", f"tool error ({params.name}): not_found: no "
                                    f"tool named {params.name!r}; tools: {sorted(self._tools)}",
                                    tool_name=params.name))
        loop = asyncio.get_running_loop()
        replied: asyncio.Future[CallReply] = loop.create_future()
        call = ToolCall(id=uuid.uuid4().hex, name=tool.name, arguments=params.arguments or {})
        progress = None if token_of(getattr(ctx, "meta", None)) is None \
            else McpProgress(loop, ctx.session.report_progress)
        actor = self._dispatcher.start_call(tool, call, CallContext(tool_call=call,
                                                                    progress=progress),
                                            _reply_to(loop, replied))
        try:
            reply = await replied
        except asyncio.CancelledError:
            if actor is not None:  # the client cancelled: so does the call
                actor.stop(block=False)
            raise
        if progress is not None:  # the reports the call made reach the client before its result
            await progress.flush()
        return mcp_result(reply)

    def close(self) -> None:
        """Stop the calls' supervisor, then the actors' threads and the runner. Idempotent."""
        try:
            self._calls.stop()
        finally:
            self._dispatcher.close()
            self._runner.close()

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


def _reply_to(loop: asyncio.AbstractEventLoop, replied: asyncio.Future[CallReply]
              ) -> Callable[[CallReply], None]:
    def reply(outcome: CallReply) -> None:
        loop.call_soon_threadsafe(lambda: None if replied.done() else replied.set_result(outcome))
    return reply


def mcp_result(reply: CallReply) -> mcp_types.CallToolResult:
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
