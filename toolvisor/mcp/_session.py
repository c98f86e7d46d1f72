"""``McpSession``: one connection to one MCP server, on an event loop of its own.

The SDK's cancel scopes must be entered and left in one task, so one thread owns the loop and
one task on it (``_main``) enters the ``Client`` and leaves it; every other thread submits
calls to the loop (:meth:`McpSession.call`) and gets a ``concurrent.futures.Future`` that is
always settled, with the call's result or its ``ToolError``. The session ends when the server
closes the transport, a call finds the session gone, or :meth:`close` asks; then ``on_lost``
is told (unless it was asked), and every call still in flight gets ``handler_exit``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolvisor._logging import get_event_log
from toolvisor.contract import HandlerResult
from toolvisor.mcp._errors import transport_closed
from toolvisor.mcp._results import crash, handler_result, session_lost


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server the session spawns and talks to over its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A streamable HTTP server at ``url``; ``headers`` go with every request (auth)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


ServerAddress = StdioServer | HttpServer


@asynccontextmanager
async def _transport(server: ServerAddress, closed: asyncio.Event
                     ) -> AsyncIterator[TransportStreams]:
    """The server's streams, with ``closed`` set when the server ends the read side (EOF)."""
    async with AsyncExitStack() as stack:
        if isinstance(server, StdioServer):
            inner: Any = stdio_client(StdioServerParameters(
                command=server.command, args=list(server.args),
                env=dict(server.env) if server.env is not None else None, cwd=server.cwd))
        else:
            web = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(server.headers)))
            inner = streamable_http_client(server.url, http_client=web)
        read, write = await stack.enter_async_context(inner)
        async with _watched(read, closed) as watched:
            yield watched, write


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


class McpSession:
    """One connection: ``open`` it, ``call`` tools from any thread, ``close`` it.

    ``on_tools`` gets each full tool listing (the first before ``open`` returns);
    ``on_lost`` is told once if the session ends without ``close``.
    """

    def __init__(self, server: ServerAddress, name: str,
                 on_tools: Callable[[list[mcp_types.Tool]], None],
                 on_lost: Callable[[str], None]) -> None:
        self._server = server
        self._on_tools = on_tools
        self._on_lost = on_lost
        self._log = get_event_log("mcp", source=name)
        self._thread = threading.Thread(target=self._run, name=f"mcp-{name}", daemon=True)
        self._lock = threading.Lock()  # guards _submitted and _ended
        self._submitted: set[Future[HandlerResult]] = set()
        self._ended = False
        self._ready = threading.Event()  # set when listed, or when the session ended
        self._closing = False
        self._connected = False
        self._cut_off = False
        self._client: Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._lost_why: str | None = None
        self._error: BaseException | None = None

    # -- any thread -------------------------------------------------------------------------

    def open(self, timeout: float) -> None:
        """Connect, list the tools; raises ``ConnectionError`` if that fails within
        ``timeout`` seconds (the session is then closed)."""
        self._thread.start()
        if not self._ready.wait(timeout):
            self.close()
            raise ConnectionError(f"the MCP server did not answer within {timeout} s")
        if self._ended:
            self._thread.join()
            error = self._error
            raise ConnectionError(f"could not connect to the MCP server: "
                                  f"{type(error).__name__}: {error}") from error

    def call(self, tool: str, arguments: Mapping[str, Any], call_id: str | None
             ) -> Future[HandlerResult]:
        """Call ``tool`` on the loop; the future always settles (never with an exception)."""
        future: Future[HandlerResult] = Future()
        with self._lock:
            loop = self._loop
            if self._ended or loop is None:
                future.set_result(transport_closed(tool, call_id, "the server is not connected"))
                return future
            self._submitted.add(future)
        future.add_done_callback(self._forget)
        inner = asyncio.run_coroutine_threadsafe(self._call(tool, dict(arguments), call_id), loop)
        inner.add_done_callback(lambda done: _settle(future, done, tool, call_id))
        future.add_done_callback(lambda done: inner.cancel() if done.cancelled() else None)
        return future

    def close(self) -> None:
        """End the session (the server process is stopped) and join its thread. Idempotent."""
        self._closing = True
        loop, task = self._loop, self._main_task
        if loop is not None and task is not None:
            with suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(task.cancel)
        if self._thread.ident is not None:
            self._thread.join()

    def _forget(self, future: Future[HandlerResult]) -> None:
        with self._lock:
            self._submitted.discard(future)

    # -- the session's thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            with self._lock:
                self._ended = True
                left = list(self._submitted)
            for future in left:  # submitted as the loop closed: they never ran
                if future.set_running_or_notify_cancel():
                    future.set_result(transport_closed("?", None, "the connection closed"))
            self._ready.set()
            if self._connected and not self._closing:
                self._on_lost(self._lost_why or f"the session failed: {self._error!r}")

    async def _main(self) -> None:
        self._main_task = asyncio.current_task()
        self._stopping = asyncio.Event()
        self._wanted = self._listed = 0  # tool-list changes announced, and listed since
        self._refreshed = asyncio.Condition()
        self._calls: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()
        closed = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
        try:
            async with Client(_transport(self._server, closed), cache=None,
                              message_handler=self._on_message) as client:
                self._client = client
                async with anyio.create_task_group() as group:
                    await group.start(self._listen)
                    await self._list_tools()
                    self._connected = True
                    self._ready.set()
                    self._log.info("mcp_connected", protocol=client.protocol_version)
                    group.start_soon(self._keep_listed)
                    group.start_soon(self._until_closed, closed)
                    await self._stopping.wait()
                    group.cancel_scope.cancel()
        except asyncio.CancelledError:
            if not self._closing:
                raise
        except Exception as exc:
            self._error = exc
            self._log.warning("mcp_session_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._cut_off = True
            for task in list(self._calls):
                task.cancel()
            await asyncio.gather(*self._calls, return_exceptions=True)

    async def _until_closed(self, closed: asyncio.Event) -> None:
        await closed.wait()
        self._lose("the server closed the connection")

    def _lose(self, why: str) -> None:
        if self._lost_why is None:
            self._lost_why = why
            self._log.warning("mcp_connection_lost", why=why)
        self._stopping.set()

    async def _call(self, tool: str, arguments: dict[str, Any], call_id: str | None
                    ) -> HandlerResult:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            if self._stopping.is_set():
                return transport_closed(tool, call_id, "the connection is closing")
            assert self._client is not None
            result = await self._client.call_tool(tool, arguments)
            await self._await_listing()
            return handler_result(result)
        except asyncio.CancelledError:
            if self._cut_off:
                return transport_closed(tool, call_id, "the connection closed mid-call")
            raise
        except Exception as exc:
            if session_lost(exc):
                self._lose(f"{type(exc).__name__}: {exc}")
            return crash(tool, call_id, exc)
        finally:
            self._calls.discard(task)

    # -- the tool list ------------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._announce()
        elif isinstance(message, Exception):
            self._log.warning("mcp_transport_error", error=f"{type(message).__name__}: {message}")

    def _announce(self) -> None:
        self._wanted += 1
        self._changed.set()

    async def _keep_listed(self) -> None:
        """List the tools again after each announced change (changes that come together are
        listed once)."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            wanted = self._wanted
            try:
                await self._list_tools()
            except MCPError as exc:
                if session_lost(exc):
                    self._lose(f"{type(exc).__name__}: {exc}")
                    return
                self._log.warning("mcp_list_tools_failed", error=str(exc))
            async with self._refreshed:
                self._listed = wanted
                self._refreshed.notify_all()

    async def _await_listing(self) -> None:
        """Let a change announced before a call's result reach the catalog before the result
        does, so the model's next request offers the new tools."""
        wanted = self._wanted
        if self._listed >= wanted:
            return
        async with self._refreshed:
            await self._refreshed.wait_for(lambda: self._listed >= wanted)

    async def _list_tools(self) -> None:
        assert self._client is not None
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await self._client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._on_tools(tools)

    async def _listen(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Hold the subscription stream open where the server offers one (2026-07-28); started
        once it is acknowledged, before the first listing, so no change is missed."""
        client = self._client
        assert client is not None
        capability = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or capability is None \
                or not capability.list_changed:
            task_status.started()
            return
        listening = False
        try:
            async with client.listen(tools_list_changed=True) as events:
                task_status.started()
                listening = True
                async for _ in events:
                    self._announce()
        except (ListenNotSupportedError, SubscriptionLost, MCPError) as exc:
            self._log.info("mcp_listen_ended", error=f"{type(exc).__name__}: {exc}")
            if not listening:  # refused at the start: the session goes on without it
                task_status.started()
            elif not self._stopping.is_set():  # cut off mid-session: the server went away
                self._lose(f"the subscription stream ended: {type(exc).__name__}: {exc}")


def _settle(future: Future[HandlerResult], done: Future[HandlerResult], tool: str,
            call_id: str | None) -> None:
    """Copy the loop's result to the caller's future; a call cancelled on the loop becomes
    ``handler_exit``."""
    if future.done():
        return
    result = transport_closed(tool, call_id, "the call was cut off") \
        if done.cancelled() or done.exception() is not None else done.result()
    if future.set_running_or_notify_cancel():
        future.set_result(result)
