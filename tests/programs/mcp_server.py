"""A small MCP server (the official SDK's ``MCPServer``) for the MCP tests.

``python -m tests.programs.mcp_server`` serves over stdio (and says so on stderr); ``--http`` serves
streamable HTTP on a free port of 127.0.0.1 and prints ``{"url": ...}`` first, so a test
reads where it is instead of waiting; ``--legacy`` speaks only the 2025-11-25 protocol (the
``initialize`` handshake, sessions with ids), as the reference servers do; ``--doomed`` exits
just after each tool listing (a server that keeps dying); ``--token T`` refuses HTTP
requests without ``Authorization: Bearer T``; ``--port N`` serves on that port (a restarted
server takes its predecessor's place); ``--grown`` starts with the tool ``grow`` adds;
``--refuse 404|400|400-null|400-id`` is how a session the ``forget``
tool forgot is refused (404 as the SDK's transports; 400 as the reference servers, whose
JSON-RPC error has no ``id`` member at all; 400 with ``"id": null``, or with the request's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from typing import Any, ClassVar

import anyio
import mcp_types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import PlainTextResponse

TASKS_REQUIRED = {"long_job"}  # listed with execution.taskSupport "required"


class _TestServer(MCPServer):
    """Lists the tools of ``TASKS_REQUIRED`` as callable only as MCP tasks."""

    async def list_tools(self) -> Any:
        return [tool.model_copy(update={"execution": mcp_types.ToolExecution(
                    task_support="required")}) if tool.name in TASKS_REQUIRED else tool
                for tool in await super().list_tools()]


app = _TestServer("toolvisor-tests")
_cancelled = anyio.Event()
_sessions: dict[str, set[bytes]] = {"issued": set(), "forgotten": set()}
_refused: list[str] = []  # the methods of the requests refused for a forgotten session
_forget_all = anyio.Event()
_count = [0]


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


@app.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@app.tool()
def count() -> int:
    """How many times this tool ran on this server, this call included."""
    _count[0] += 1
    return _count[0]


@app.tool()
def boom(why: str) -> str:
    """A tool that fails: the server reports it as an isError result."""
    raise RuntimeError(why)


@app.tool()
def rpc_error() -> str:
    """A tool that answers with a JSON-RPC error instead of a result."""
    raise MCPError(code=-32099, message="the server refused this request")


@app.tool()
def die() -> str:
    """The server process exits in the middle of this call."""
    os._exit(3)


@app.tool()
async def hang() -> str:
    """Never answers; when the client cancels it, ``was_cancelled`` says so."""
    try:
        await anyio.sleep_forever()
    finally:
        _cancelled.set()
    return "unreachable"


@app.tool()
async def spin() -> str:
    """Says ``{"hung": "mcp"}`` on stderr, then burns the CPU on the server's event loop and
    never answers: the server reads nothing more, EOF on its stdin included (a server stuck in
    a call)."""
    os.write(2, b'{"hung": "mcp"}\n')
    while True:
        pass


@app.tool()
async def was_cancelled() -> bool:
    """Whether a ``hang`` call was cancelled by the client (waits a little for it)."""
    with anyio.move_on_after(10):
        await _cancelled.wait()
    return _cancelled.is_set()


@app.tool()
async def reports(steps: int, ctx: Context) -> str:
    """Reports its progress step by step (to a client that asked for it), then is done."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return "reported"


@app.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``late`` and tell the clients the tool list changed."""
    app.add_tool(_late, name="late", description="A tool added at run time.")
    await ctx.notify_tools_changed()
    return "grown"


@app.tool()
def forget(forever: bool = False) -> str:
    """Forget the HTTP sessions opened so far (``forever``: every later one too), as a
    server redeployed under its clients would."""
    _sessions["forgotten"] |= _sessions["issued"]
    if forever:
        _forget_all.set()
    return "forgotten"


@app.tool()
def refused() -> list[str]:
    """The methods of the requests refused because they named a forgotten session."""
    return _refused


@app.tool()
def client(ctx: Context) -> str:
    """How the client introduced itself: its name and version."""
    params = ctx.session.client_params
    return "unknown" if params is None else f"{params.client_info.name} " \
                                            f"{params.client_info.version}"


@app.tool()
def long_job() -> str:
    """A tool the server runs only as an MCP task."""
    return "done"


def _late(word: str) -> str:
    return word.upper()


class _Doomed(MCPServer):
    """Exits just after it answered a tool listing."""

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        asyncio.get_running_loop().call_later(0.1, os._exit, 4)  # once the answer is out
        return tools


async def _legacy_discover(ctx: Any, params: Any) -> mcp_types.DiscoverResult:
    """What a server of the handshake era answers to ``server/discover``: only its own
    version, so the client falls back to ``initialize`` (sessions with ids)."""
    return mcp_types.DiscoverResult(supported_versions=[LATEST_HANDSHAKE_VERSION],
                                    capabilities=mcp_types.ServerCapabilities())


class _Forgetful:
    """ASGI middleware: notes each session id the server hands out, and refuses requests
    naming one ``forget`` forgot as ``refuse`` says (a key of ``ANSWERS``: the HTTP status,
    and how the JSON-RPC error names no request), as servers that lost their sessions
    answer."""

    ANSWERS: ClassVar[dict[str, dict[str, Any]]] = {
        "404": {"jsonrpc": "2.0", "id": None,
                "error": {"code": -32001, "message": "Session not found"}},
        "400": {"jsonrpc": "2.0",
                "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}},
        "400-null": {"jsonrpc": "2.0", "id": None,
                     "error": {"code": -32000,
                               "message": "Bad Request: No valid session ID provided"}},
        "400-id": {"jsonrpc": "2.0",  # the request's own id: the reference server's code
                   "error": {"code": -32000,  # behind a JSON body parser
                             "message": "Bad Request: No valid session ID provided"}},
    }

    def __init__(self, inner: Any, refuse: str) -> None:
        self.inner = inner
        self.status = int(refuse.split("-", maxsplit=1)[0])
        self.answer = self.ANSWERS[refuse]
        self.echoes_id = refuse.endswith("-id")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        session = dict(scope["headers"]).get(b"mcp-session-id")
        if session is not None and (session in _sessions["forgotten"] or _forget_all.is_set()):
            request = await _request_of(scope, receive)
            _refused.append(str(request.get("method", scope["method"])))
            answer = {**self.answer, "id": request.get("id")} if self.echoes_id else self.answer
            body = json.dumps(answer).encode()
            await send({"type": "http.response.start", "status": self.status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return

        async def noting(message: Any) -> None:
            if message["type"] == "http.response.start":
                _sessions["issued"].update(value for name, value in message["headers"]
                                           if name.lower() == b"mcp-session-id")
            await send(message)

        await self.inner(scope, receive, noting)


async def _request_of(scope: Any, receive: Any) -> dict[str, Any]:
    """The JSON-RPC request in an HTTP request's body; empty for a request without one (GET,
    DELETE)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    parsed = json.loads(body) if body else {}
    return parsed if isinstance(parsed, dict) else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--doomed", action="store_true")
    parser.add_argument("--token")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--refuse", choices=sorted(_Forgetful.ANSWERS), default="404")
    parser.add_argument("--grown", action="store_true")
    options = parser.parse_args()
    server: MCPServer = app
    if options.grown:
        app.add_tool(_late, name="late", description="A tool added at run time.")
    if options.doomed:
        server = _Doomed("doomed")
        server.add_tool(echo)
    if options.legacy:
        server._lowlevel_server.add_request_handler(
            "server/discover", mcp_types.RequestParams, _legacy_discover)
    if not options.http:
        print(f"tests.programs.mcp_server {os.getpid()} serving on stdio", file=sys.stderr,
              flush=True)
        server.run()
        return
    web = server.streamable_http_app()
    web.add_middleware(_Forgetful, refuse=options.refuse)
    if options.token:
        async def check(request: Any, call_next: Any) -> Any:
            if request.headers.get("authorization") != f"Bearer {options.token}":
                return PlainTextResponse("unauthorized", status_code=401)
            return await call_next(request)

        web.add_middleware(BaseHTTPMiddleware, dispatch=check)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart takes its port back
    sock.bind(("127.0.0.1", options.port))
    sock.listen()  # before the URL is told: a client may connect at once
    port = sock.getsockname()[1]
    sys.stdout.write(json.dumps({"url": f"http://127.0.0.1:{port}/mcp"}) + "\n")
    sys.stdout.flush()
    config = uvicorn.Config(web, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
