"""``McpToolProvider``: an MCP server as a supervised tool source of the catalog.

The provider is what the registry reads (its ``version`` and manifests: the server's tools
as last listed, kept while it reconnects) and what a call runs (each tool's handler submits
the call to the current session). The session itself belongs to a supervised
``McpConnection`` actor, under a supervisor of the provider's own (``child_spec``): a session
that ends is that actor's exit, restarted within the provider's intensity; past it the
supervisor gives up and ``on_give_up`` lets the owner orphan the provider's tools.

A server that cannot be reached when the agent starts fails the start (a wrong address is
told at once). Once a session was up, a restarted connection that cannot reach the server
stays alive and tries again with capped exponential backoff (a server being redeployed is
down for seconds, and restarts in a row would spend the intensity in milliseconds); only
when ``reconnect_attempts`` are spent does it exit, and the next start fails fast, so the
supervisor gives up within its intensity.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import pykka
from pykka import ActorDeadError

from toolvisor._logging import get_event_log
from toolvisor.contract import CallContext, HandlerResult, Tool
from toolvisor.mcp._errors import McpConnectionError, transport_closed
from toolvisor.mcp._sdk import load
from toolvisor.registry import DynamicToolProvider
from toolvisor.supervisors import ChildSpec, SupervisedActor, Supervisor, SupervisorEventHook

if TYPE_CHECKING:
    import mcp_types

    from toolvisor.mcp._session import McpSession
    from toolvisor.mcp._transport import ServerAddress


class McpToolProvider(DynamicToolProvider):
    """The tools of one MCP server, as the catalog source ``mcp:<name>``.

    Build one with :meth:`stdio` (a command to spawn) or :meth:`http` (a streamable HTTP
    URL, with headers for auth) and give it to ``Agent(model, [..., provider])``, which adds it
    to the catalog and its connection to the supervision tree. Calls run as ``asyncio`` tools
    with the agent's tool timeout (or ``timeout``); at the deadline the call is cancelled and
    the server gets the MCP cancellation notification. ``max_restarts`` within
    ``max_seconds`` is the connection's intensity. After a lost session the connection tries
    ``reconnect_attempts`` times, ``reconnect_delay`` seconds apart at first, doubling up to
    ``max_reconnect_delay`` (0 attempts: the restart fails at once, as at the start). An HTTP
    server that no longer knows the session (redeployed while the agent was idle) is not a
    loss: the session is renewed at once, its tools listed again, and the call the server
    refused for it is sent once more (it never ran); no restart is spent. A stdio server's
    stderr goes to this process's stderr, or to ``errlog`` (an open file, or a path appended
    to). Tools the server says need MCP tasks (``execution.taskSupport: "required"``) are
    withheld from the catalog (logged ``mcp_tool_withheld``): they could never be called.
    The client introduces itself to servers as ``toolvisor`` and its version.
    """

    def __init__(self, name: str, server: ServerAddress, *, timeout: float | None = None,
                 max_restarts: int = 3, max_seconds: float = 5.0,
                 connect_timeout: float = 30.0, reconnect_attempts: int = 8,
                 reconnect_delay: float = 0.1, max_reconnect_delay: float = 5.0) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"an MCP server needs a non-empty name, got {name!r}")
        if isinstance(reconnect_attempts, bool) or not isinstance(reconnect_attempts, int) \
                or reconnect_attempts < 0:
            raise ValueError(f"reconnect_attempts must be an int >= 0, got "
                             f"{reconnect_attempts!r}")
        if not 0 < reconnect_delay <= max_reconnect_delay:
            raise ValueError(f"need 0 < reconnect_delay <= max_reconnect_delay, got "
                             f"{reconnect_delay!r} and {max_reconnect_delay!r}")
        super().__init__()
        self.name = name
        self._server = server
        self._timeout = timeout
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._connect_timeout = connect_timeout
        self._reconnect_attempts = reconnect_attempts
        self._reconnect_delay = reconnect_delay
        self._max_reconnect_delay = max_reconnect_delay
        self._log = get_event_log("mcp", source=self.source)
        self._session: McpSession | None = None
        # The tools needing MCP tasks as last listed: written by the session thread of the
        # moment, which takes the listings (one session at a time).
        self._withheld: frozenset[str] = frozenset()
        # Whether a session was up and a restart should reconnect rather than fail: written
        # by the connection actor of the moment (one at a time, under its supervisor).
        self._reconnect = False

    @classmethod
    def stdio(cls, name: str, command: Sequence[str], *, env: Mapping[str, str] | None = None,
              cwd: str | None = None, errlog: TextIO | str | os.PathLike[str] | None = None,
              **settings: Any) -> McpToolProvider:
        """A server spawned as ``command`` (program and arguments), spoken to over stdio; its
        stderr goes to ``errlog`` (an open file, or a path appended to) if given."""
        transport = load("_transport")
        program, *args = command
        return cls(name, transport.StdioServer(program, tuple(args), env, cwd, errlog),
                   **settings)

    @classmethod
    def http(cls, name: str, url: str, *, headers: Mapping[str, str] | None = None,
             **settings: Any) -> McpToolProvider:
        """A streamable HTTP server at ``url``; ``headers`` go with every request."""
        transport = load("_transport")
        return cls(name, transport.HttpServer(url, dict(headers or {})), **settings)

    @property
    def source(self) -> str:
        """The provider's source name in a registry: ``mcp:<name>``."""
        return f"mcp:{self.name}"

    def child_spec(self, on_give_up: Callable[[], None] | None = None,
                   on_event: SupervisorEventHook | None = None) -> ChildSpec:
        """The provider's supervisor, as a ``temporary`` child for the agent's tree: it keeps
        the connection up within the intensity, then calls ``on_give_up`` and exits (and is
        not restarted: the rest of the tree goes on). ``on_event`` is its ``Supervisor``
        hook: the agent's tracing hears of the connection's restarts through it."""
        connection = ChildSpec("connection", lambda: McpConnection.start(self),
                               start_timeout=self._connect_timeout + 5.0)
        return ChildSpec(self.source, lambda: Supervisor.start(
            [connection], max_restarts=self._max_restarts, max_seconds=self._max_seconds,
            name=self.source, on_give_up=on_give_up, on_event=on_event), type="supervisor",
            restart="temporary")

    # -- the connection's side -----------------------------------------------------------------

    def _attach(self, session: McpSession | None) -> None:
        self._session = session

    def _take_listing(self, listed: list[mcp_types.Tool]) -> None:
        """Take a full listing from the server: the tools change (and ``version`` moves) only
        if what the model is told changed."""
        tools: dict[str, Tool] = {}
        withheld = frozenset(item.name for item in listed if _needs_tasks(item))
        for name in sorted(withheld - self._withheld):
            self._log.warning("mcp_tool_withheld", tool=name,
                              why='execution.taskSupport is "required" and toolvisor does not '
                                  "make task-augmented calls")
        self._withheld = withheld
        for item in listed:
            if item.name in withheld:
                continue
            try:
                tools[item.name] = Tool(
                    name=item.name, description=item.description or "",
                    input_schema=item.input_schema, handler=self._handler(item.name),
                    timeout=self._timeout, isolation="asyncio")
            except (ValueError, TypeError) as exc:
                self._log.warning("mcp_tool_skipped", tool=item.name, error=str(exc))
        if [t.spec for t in tools.values()] == [m.spec for m in self.manifests()]:
            return
        self.replace_all(tools.values())
        self._log.info("mcp_tools_listed", tools=list(tools), version=self.version)

    def _handler(self, tool: str) -> Callable[[dict[str, Any], CallContext], Any]:
        async def call(arguments: dict[str, Any], ctx: CallContext) -> HandlerResult:
            session = self._session
            if session is None:
                return transport_closed(tool, ctx.tool_call_id,
                                        f"the MCP server {self.name!r} is not connected")
            return await asyncio.wrap_future(session.call(tool, arguments, ctx.tool_call_id,
                                                          ctx.report_progress))

        call.__name__ = tool
        return call

    def __repr__(self) -> str:
        return f"McpToolProvider({self.name!r}, tools={list(self._tools)})"


def _needs_tasks(tool: mcp_types.Tool) -> bool:
    """Whether the server accepts calls of ``tool`` only as MCP tasks."""
    return tool.execution is not None and tool.execution.task_support == "required"


@dataclass(frozen=True, slots=True)
class _Lost:
    why: str


@dataclass(frozen=True, slots=True)
class _TryAgain:
    attempt: int


class McpConnection(SupervisedActor, pykka.ThreadingActor):
    """One session of a provider, supervised: it exits with ``McpConnectionError`` when the
    session ends, and its supervisor restarts it. The first start connects (its tools listed)
    or fails; a restart that cannot connect keeps trying with backoff (``_TryAgain``, told by
    a timer that ``_timer`` holds; state owned by the actor's thread)."""

    use_daemon_thread = True  # no toolvisor thread keeps the interpreter alive

    def __init__(self, provider: McpToolProvider) -> None:
        super().__init__()
        self._provider = provider
        self._session: McpSession | None = None
        self._timer: threading.Timer | None = None

    def on_start(self) -> None:
        provider = self._provider
        try:
            self._connect()
        except McpConnectionError as exc:
            if not provider._reconnect or provider._reconnect_attempts == 0:
                raise
            self._not_reconnected(0, exc)

    def _connect(self) -> None:
        provider = self._provider
        session = load("_session").McpSession(provider._server, provider.source,
                                              provider._take_listing, self._lost)
        try:
            session.open(provider._connect_timeout)
        except ConnectionError as exc:
            raise McpConnectionError(f"{provider.source}: {exc}") from exc.__cause__
        self._session = session
        provider._attach(session)
        provider._reconnect = True

    def _try_again(self, attempt: int) -> None:
        """Tell this actor ``_TryAgain(attempt)`` after the backoff of that attempt."""
        provider = self._provider
        delay = min(provider._reconnect_delay * 2 ** (attempt - 1),
                    provider._max_reconnect_delay)
        self._timer = threading.Timer(delay, self._tell_quietly, args=(_TryAgain(attempt),))
        self._timer.daemon = True
        self._timer.start()

    def _tell_quietly(self, message: Any) -> None:
        with suppress(ActorDeadError):
            self.actor_ref.tell(message)

    def _lost(self, why: str) -> None:
        """Told by the session's thread: end this incarnation (its supervisor decides)."""
        self._tell_quietly(_Lost(why))

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Lost):
            raise McpConnectionError(f"{self._provider.source}: {message.why}")
        if isinstance(message, _TryAgain):
            self._reconnect_once(message.attempt)
            return None
        return super().on_receive(message)

    def _reconnect_once(self, attempt: int) -> None:
        try:
            self._connect()
        except McpConnectionError as exc:
            self._not_reconnected(attempt, exc)
            return
        self._provider._log.info("mcp_reconnected", attempt=attempt)

    def _not_reconnected(self, attempt: int, exc: McpConnectionError) -> None:
        """Attempt ``attempt`` failed: try again after the backoff, or, with the attempts
        spent, exit (the next start fails fast: the supervisor decides)."""
        provider = self._provider
        provider._log.warning("mcp_reconnect_failed", attempt=attempt, error=str(exc))
        if attempt < provider._reconnect_attempts:
            self._try_again(attempt + 1)
            return
        provider._reconnect = False
        raise McpConnectionError(
            f"{provider.source}: could not reconnect in {attempt} attempts: {exc}") from exc

    def on_stop(self) -> None:
        self._close()

    def on_failure(self, *args: Any) -> None:
        self._close()

    def _close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            timer.join()
        session, self._session = self._session, None
        if session is not None:
            self._provider._attach(None)
            session.close()
