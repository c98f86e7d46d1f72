"""``McpSession``: one connection to one MCP server, on an event loop of its own.

The SDK's cancel scopes must be entered and left in one task, so one thread owns the loop and
one task on it (``_main``) enters the ``Client`` and leaves it; every other thread submits
calls to the loop (:meth:`McpSession.call`) and gets a ``concurrent.futures.Future`` that is
always settled, with the call's result or its ``ToolError``.

An HTTP server that no longer knows the session (it was redeployed while the agent was idle:
HTTP 404 to a request naming the session, or a 400 whose JSON-RPC error names no request and
a session) has not failed: the session is renewed in place (a new ``Client`` on the same
loop, initialized and listed again: one ``_Life`` after the other), and the call it refused
is sent once more, on the new one. That is safe because the refusal says the server never ran
it; a call cut off by a lost connection (the server may have run it) is never sent again.
The session ends when the server closes the transport, a call finds it gone, a renewal
fails, or :meth:`close` asks; then ``on_lost`` is told (unless it was asked), and every call
still in flight gets ``handler_exit``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolvisor._logging import get_event_log
from toolvisor.contract import HandlerResult
from toolvisor.mcp._errors import describe, real_cause, session_expired, transport_closed
from toolvisor.mcp._progress import ReportProgress, progress_callback
from toolvisor.mcp._results import crash, handler_result, session_lost
from toolvisor.mcp._transport import (
    CLIENT_INFO,
    Refusal,
    ServerAddress,
    SessionRefused,
    open_transport,
)


@dataclass(eq=False)
class _Life:
    """One ``Client`` of the session: the first, or a renewal after the server forgot the
    one before. Owned by the session's loop."""

    number: int
    over: asyncio.Event = field(default_factory=asyncio.Event)  # expired, or the session ends
    refusals: set[Refusal] = field(default_factory=set)
    client: Client | None = None
    accepted: bool = False  # the server accepted a request naming its session (HTTP)
    in_flight: int = 0  # calls sent on it and not answered yet
    drained: asyncio.Event = field(default_factory=asyncio.Event)  # set when in_flight is 0


class McpSession:
    """One connection: ``open`` it, ``call`` tools from any thread, ``close`` it.

    ``on_tools`` gets each full tool listing (the first before ``open`` returns, one after
    each renewal); ``on_lost`` is told once if the session ends without ``close``.
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
                                  f"{describe(error) if error else 'it ended'}") from error

    def call(self, tool: str, arguments: Mapping[str, Any], call_id: str | None,
             report: ReportProgress | None = None) -> Future[HandlerResult]:
        """Call ``tool`` on the loop; the future always settles (never with an exception).
        The server's progress notifications for the call go to ``report`` (on the loop)."""
        future: Future[HandlerResult] = Future()
        with self._lock:
            loop = self._loop
            if self._ended or loop is None:
                future.set_result(transport_closed(tool, call_id, "the server is not connected"))
                return future
            self._submitted.add(future)
        future.add_done_callback(self._forget)
        inner = asyncio.run_coroutine_threadsafe(
            self._call(tool, dict(arguments), call_id, report), loop)
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
                self._on_lost(self._lost_why or self._failure())

    def _failure(self) -> str:
        error = self._error
        return "the session was cancelled" if error is None \
            else f"the session failed: {describe(error)}"

    async def _main(self) -> None:
        self._main_task = asyncio.current_task()
        self._stopping = asyncio.Event()
        self._wanted = self._listed = 0  # tool-list changes announced, and listed since
        self._refreshed = asyncio.Condition()
        self._calls: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()
        self._life: _Life | None = None  # the client serving calls now; None while renewing
        self._life_changed = asyncio.Event()  # set, and replaced, when _life changes
        with self._lock:
            self._loop = asyncio.get_running_loop()
        try:
            number = 0
            while not self._stopping.is_set():
                number += 1
                await self._live(_Life(number))
        except asyncio.CancelledError:
            if not self._closing:
                raise
        except Exception as exc:
            self._error = exc
            self._log.warning("mcp_session_failed", error=describe(exc))
        finally:
            self._cut_off = True
            self._stopping.set()
            self._set_life(None)
            for task in list(self._calls):
                task.cancel()
            await asyncio.gather(*self._calls, return_exceptions=True)

    async def _live(self, life: _Life) -> None:
        """Serve calls on one ``Client`` until the session ends or the server forgets it."""
        closed = asyncio.Event()
        transport = open_transport(self._server, closed,
                                   lambda status, refused: self._seen(life, status, refused))
        async with Client(transport, cache=None, client_info=CLIENT_INFO,
                          message_handler=self._on_message) as client:
            life.client = client
            async with anyio.create_task_group() as group:
                await group.start(self._listen, life)
                await self._list_tools(client)
                async with self._refreshed:  # a listing a lost client owed is done now
                    self._listed = self._wanted
                    self._refreshed.notify_all()
                self._set_life(life)
                if life.number == 1:
                    self._connected = True
                    self._ready.set()
                    self._log.info("mcp_connected", protocol=client.protocol_version)
                else:
                    self._log.info("mcp_session_renewed", protocol=client.protocol_version,
                                   renewal=life.number - 1)
                group.start_soon(self._keep_listed, life)
                group.start_soon(self._until_closed, closed, life)
                await _first(life.over, self._stopping)
                # Renewing: the calls sent on this client hear their answers first (a refusal
                # is sent again); a session that ends cuts them off at once.
                while life.in_flight and not self._stopping.is_set():
                    await _first(life.drained, self._stopping)
                group.cancel_scope.cancel()

    def _set_life(self, life: _Life | None) -> None:
        self._life = life
        changed, self._life_changed = self._life_changed, asyncio.Event()
        changed.set()

    async def _serving(self, after: _Life | None = None) -> _Life | None:
        """The client serving calls (another than ``after``), once there is one; ``None`` if
        the session ended."""
        while not self._stopping.is_set():
            life = self._life
            if life is not None and life is not after and not life.over.is_set():
                return life
            await self._life_changed.wait()
        return None

    def _seen(self, life: _Life, status: int, refused: SessionRefused | None) -> None:
        """The server took a request naming ``life``'s session with HTTP ``status``. A
        refusal renews the session, unless it is a renewed one the server never accepted
        (it forgets every session: renewing again would go round for ever)."""
        if refused is None:
            life.accepted = True
            return
        life.refusals.add(refused.told)
        if life.over.is_set() or self._stopping.is_set():
            return
        why = f"HTTP {status}: {refused.said}"
        if life.number > 1 and not life.accepted:
            self._lose(f"the server refused a renewed session it never accepted ({why})")
            return
        self._log.info("mcp_session_expired", status=status, error=refused.said)
        life.over.set()
        self._set_life(None)

    async def _until_closed(self, closed: asyncio.Event, life: _Life) -> None:
        await closed.wait()
        if not life.over.is_set():
            self._lose("the server closed the connection")

    def _lose(self, why: str) -> None:
        if self._lost_why is None:
            self._lost_why = why
            self._log.warning("mcp_connection_lost", why=why)
        self._stopping.set()
        life = self._life
        if life is not None:
            life.over.set()
        self._set_life(None)

    async def _call(self, tool: str, arguments: dict[str, Any], call_id: str | None,
                    report: ReportProgress | None) -> HandlerResult:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            return await self._send(tool, arguments, call_id, report)
        except asyncio.CancelledError:
            if self._cut_off:
                return transport_closed(tool, call_id, "the connection closed mid-call")
            raise
        finally:
            self._calls.discard(task)

    async def _send(self, tool: str, arguments: dict[str, Any], call_id: str | None,
                    report: ReportProgress | None) -> HandlerResult:
        """Send the call; once more on the renewed session if the server refused the session
        it was sent on (the refusal says the server never ran it)."""
        life = await self._serving()
        for attempt in (1, 2):
            if life is None:
                return transport_closed(tool, call_id, "the connection is closing")
            outcome = await self._call_on(life, tool, arguments, report)
            if not isinstance(outcome, Exception):
                await self._await_listing()
                return handler_result(outcome)
            if not isinstance(outcome, MCPError) \
                    or (outcome.code, outcome.message) not in life.refusals:
                return self._failed(life, tool, call_id, outcome)
            if attempt == 2:
                return session_expired(tool, call_id, f"the renewed session was refused too: "
                                                      f"{outcome.message}")
            try:
                life = await self._serving(life)
            except asyncio.CancelledError:
                if not self._cut_off:  # the caller gave up (its deadline)
                    raise
                life = None
            if life is None:
                return session_expired(tool, call_id, f"the session could not be renewed: "
                                                      f"{self._lost_why or self._failure()}")
        raise AssertionError("unreachable: the second attempt returns")

    @staticmethod
    async def _call_on(life: _Life, tool: str, arguments: dict[str, Any],
                       report: ReportProgress | None) -> mcp_types.CallToolResult | Exception:
        """One ``tools/call`` on ``life``'s client, counted in flight while it is out."""
        assert life.client is not None
        life.in_flight += 1
        life.drained.clear()
        try:
            return await life.client.call_tool(
                tool, arguments,
                progress_callback=None if report is None else progress_callback(report))
        except Exception as exc:
            return exc
        finally:
            life.in_flight -= 1
            if not life.in_flight:
                life.drained.set()

    def _failed(self, life: _Life, tool: str, call_id: str | None, exc: Exception
                ) -> HandlerResult:
        if session_lost(real_cause(exc)) and not life.over.is_set():  # (not one renewed)
            self._lose(describe(exc))
        return crash(tool, call_id, exc)

    # -- the tool list ------------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._announce()
        elif isinstance(message, Exception):
            self._log.warning("mcp_transport_error", error=describe(message))

    def _announce(self) -> None:
        self._wanted += 1
        self._changed.set()

    async def _keep_listed(self, life: _Life) -> None:
        """List the tools again after each announced change (changes that come together are
        listed once)."""
        assert life.client is not None
        while True:
            await self._changed.wait()
            self._changed.clear()
            wanted = self._wanted
            try:
                await self._list_tools(life.client)
            except MCPError as exc:
                if (exc.code, exc.message) in life.refusals:
                    return  # renewed, then listed by the new client
                if session_lost(exc):
                    self._lose(describe(exc))
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

    async def _list_tools(self, client: Client) -> None:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._on_tools(tools)

    async def _listen(self, life: _Life, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Hold the subscription stream open where the server offers one (2026-07-28); started
        once it is acknowledged, before the first listing, so no change is missed."""
        client = life.client
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
            self._log.info("mcp_listen_ended", error=describe(exc))
            if not listening:  # refused at the start: the session goes on without it
                task_status.started()
            elif not life.over.is_set():  # cut off mid-session: the server went away
                self._lose(f"the subscription stream ended: {describe(exc)}")


async def _first(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


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


