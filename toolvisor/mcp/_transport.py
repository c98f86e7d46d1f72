"""How a session reaches its server: the addresses (a command over stdio, a streamable HTTP
URL), the streams to them, and the HTTP refusals of a session the server no longer knows."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types
from mcp import StdioServerParameters, stdio_client
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError

from toolvisor._lifeline import die_with_parent_argv


def _client_info() -> mcp_types.Implementation:
    """How the client introduces itself to servers: toolvisor, and its version."""
    try:
        version = importlib.metadata.version("toolvisor")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        version = "unknown"
    return mcp_types.Implementation(name="toolvisor", version=version)


CLIENT_INFO = _client_info()

ErrLog = TextIO | str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server the session spawns and talks to over its stdin and stdout; its stderr goes
    to ``errlog`` (an open file, or a path appended to), else to this process's stderr."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    errlog: ErrLog | None = None

    def __post_init__(self) -> None:
        errlog = self.errlog
        if errlog is None or isinstance(errlog, str | os.PathLike):
            return
        try:
            errlog.fileno()
        except (AttributeError, OSError, ValueError) as exc:  # io.UnsupportedOperation too
            raise TypeError(f"errlog must be a path or an open file with a descriptor (the "
                            f"server process writes to it), got {type(errlog).__name__}: "
                            f"{exc}") from exc


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A streamable HTTP server at ``url``; ``headers`` go with every request (auth)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


ServerAddress = StdioServer | HttpServer

Refusal = tuple[int, str]  # the (code, message) of the JSON-RPC error a call will get


@dataclass(frozen=True, slots=True)
class SessionRefused:
    """A request the server refused because it does not know the session: ``told`` is the
    error the SDK gives the request's caller, ``said`` the server's own words."""

    told: Refusal
    said: str


SessionWatcher = Callable[[int, SessionRefused | None], None]  # HTTP status, the refusal if one


@asynccontextmanager
async def open_transport(server: ServerAddress, closed: asyncio.Event, seen: SessionWatcher
                         ) -> AsyncIterator[TransportStreams]:
    """The server's streams, with ``closed`` set when the server ends the read side (EOF);
    over HTTP, ``seen`` hears how the server took each request naming the session (see
    ``_watch_session``)."""
    async with AsyncExitStack() as stack:
        if isinstance(server, StdioServer):
            # the server dies with this process, even one too busy to read EOF on its stdin
            command, *args = die_with_parent_argv([server.command, *server.args])
            params = StdioServerParameters(
                command=command, args=args,
                env=dict(server.env) if server.env is not None else None, cwd=server.cwd)
            errlog = server.errlog
            if isinstance(errlog, str | os.PathLike):
                errlog = stack.enter_context(open(errlog, "a", encoding="utf-8"))  # noqa: SIM115
            inner: Any = stdio_client(params) if errlog is None else stdio_client(params, errlog)
        else:
            web = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(server.headers)))
            web.event_hooks = {"response": [lambda response: _watch_session(response, seen)]}
            inner = streamable_http_client(server.url, http_client=web)
        read, write = await stack.enter_async_context(inner)
        async with _watched(read, closed) as watched:
            yield watched, write


async def _watch_session(response: httpx2.Response, seen: SessionWatcher) -> None:
    """Tell ``seen`` how the server took the session a request named: accepted (a status
    under 400), or refused, as real servers refuse a session they do not know: HTTP 404 (the
    spec's "session not found"; the SDKs' servers), unless its JSON-RPC error is the
    request's own (it names the request, not a session), or a 400 whose JSON-RPC error
    speaks of the session (the reference TypeScript servers' "Bad Request: No valid session
    ID provided", whose ``id`` is missing, null, or the request's). Either refusal says the
    server did not run the request; it is told as the error the SDK will give the request's
    caller, so the caller can know it for one."""
    status = response.status_code
    if MCP_SESSION_ID not in response.request.headers:
        return
    if status < 400:
        seen(status, None)
        return
    if status not in (400, 404):
        return
    body = b""
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        with suppress(httpx2.StreamError):
            body = await response.aread()
    error = _request_error(body)
    if error is None:
        if status == 404:  # a bare 404
            seen(status, SessionRefused(_SDK_FALLBACK[status], "Not Found"))
        return
    if "session" in error.said.lower() or (status == 404 and not error.names_request):
        seen(status, SessionRefused(error.told if error.valid else _SDK_FALLBACK[status],
                                    error.said))


_SDK_FALLBACK: dict[int, Refusal] = {404: (INVALID_REQUEST, "Session terminated"),
                                     400: (INTERNAL_ERROR, "Server returned an error response")}
"""What the SDK gives a request's caller for a refusal whose body it cannot read as a
JSON-RPC error (one without an ``id`` member, which JSON-RPC requires)."""


@dataclass(frozen=True, slots=True)
class _RequestError:
    """The JSON-RPC error of a refusal's body: ``told`` its code and message, ``valid``
    whether the SDK reads it as one (and so passes it on as it is), ``names_request``
    whether its ``id`` names a request (an error of that request, not of the session)."""

    told: Refusal
    valid: bool
    names_request: bool

    @property
    def said(self) -> str:
        return self.told[1]


def _request_error(body: bytes) -> _RequestError | None:
    """The JSON-RPC error ``body`` holds, read leniently (a missing ``id`` too); ``None`` if
    it holds none."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), int) \
            or not isinstance(error.get("message"), str):
        return None
    try:
        valid = isinstance(jsonrpc_message_adapter.validate_json(body, by_name=False),
                           JSONRPCError)
    except ValidationError:
        valid = False
    return _RequestError((error["code"], error["message"]), valid, data.get("id") is not None)


@asynccontextmanager
async def _watched(read: Any, closed: asyncio.Event) -> AsyncIterator[Any]:
    """``read`` passed through, with ``closed`` set at its end."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        try:
            async with send:
                async for item in read:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        closed.set()

    async with anyio.create_task_group() as group:
        group.start_soon(pump)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()
