"""A small MCP server (the official SDK's ``MCPServer``) for the MCP tests.

``python -m tests._mcp_server`` serves over stdio; ``--http`` serves streamable HTTP on a
free port of 127.0.0.1 and prints ``{"url": ...}`` first, so a test reads where it is instead
of waiting; ``--doomed`` exits just after each tool listing (a server that keeps dying);
``--token T`` refuses HTTP requests without ``Authorization: Bearer T``; ``--port N`` serves
on that port (a restarted server takes its predecessor's place).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import PlainTextResponse

app = MCPServer("toolvisor-tests")
_cancelled = anyio.Event()


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
async def was_cancelled() -> bool:
    """Whether a ``hang`` call was cancelled by the client (waits a little for it)."""
    with anyio.move_on_after(10):
        await _cancelled.wait()
    return _cancelled.is_set()


@app.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``late`` and tell the clients the tool list changed."""
    app.add_tool(_late, name="late", description="A tool added at run time.")
    await ctx.notify_tools_changed()
    return "grown"


def _late(word: str) -> str:
    return word.upper()


class _Doomed(MCPServer):
    """Exits just after it answered a tool listing."""

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        asyncio.get_running_loop().call_later(0.1, os._exit, 4)  # once the answer is out
        return tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--doomed", action="store_true")
    parser.add_argument("--token")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    server = app
    if options.doomed:
        server = _Doomed("doomed")
        server.add_tool(echo)
    if not options.http:
        server.run()
        return
    web = server.streamable_http_app()
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
