"""The call context of a handler that runs out of process, as the worker sees it.

A worker (a ``process`` pool worker, a Ray task) gets a ``CallContext`` whose state, sessions,
completion keys, durable effects, direct completions, progress, background processes, cancel
token and trace spans
(``_worker_tracing.py``) are proxies: each use is one request over a
``ContextLink`` to the agent, which performs it on the call's real context (the very objects an
in-process handler gets, see ``_context_server.py``) and answers. A callable argument (the
``fn`` of ``run_json``) stays here: the agent calls it back over the same link. So a journaled
step, a completion key or a state write has the guarantees it has in process.

Messages are pickled tuples on a ``multiprocessing`` ``Connection`` (a private pipe, or a
socket whose peer passed the runner's handshake): ``("ask", tag, target, method, args)`` from
the worker; ``("done", value)``, ``("raised", exc)`` or ``("call", index, args)`` (run
callback ``index``) from the agent, to which the worker answers ``done`` or ``raised``. The
link's own I/O failing is ``CapabilityError`` ``link_closed``.
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from toolvisor.contract import (
    NO_DIRECT_COMPLETIONS,
    AskUser,
    CallContext,
    CapabilityError,
    CatalogEntry,
    Message,
    ModelInfo,
    ModelRequest,
    ModelResponse,
    Pending,
    SessionSnapshot,
    ToolCall,
    trace_headers,
)
from toolvisor.isolation._link._asking import portable
from toolvisor.isolation._link._remote_processes import RemoteProcesses

CAPABILITIES = ("state", "sessions", "completion_keys", "durable", "trace_spans",
                "direct_completions", "progress", "process_admin")
"""The context's capabilities a worker can reach, by the ``CallContext`` field that holds them."""

SERVED: Mapping[str, frozenset[str]] = {
    "state": frozenset({"get", "set"}),
    "sessions": frozenset({"model", "snapshot_current", "snapshot", "tool_catalog",
                           "set_tool_membership", "create_session", "start_turn",
                           "relay", "close_session"}),
    "completion_keys": frozenset({"issue"}),
    "durable": frozenset({"run_json", "external_event_key", "await_event_json",
                          "emit_process_event"}),
    "cancelled": frozenset({"is_set", "wait"}),
    "trace_spans": frozenset({"start", "apply", "end"}),
    "progress": frozenset({"report", "heartbeat"}),
    "direct_completions": frozenset({"complete"}),
    "process_admin": frozenset({"start", "wait", "list", "cancel"}),
}
"""What a worker may ask for: the methods of each capability, and nothing else."""


_tags = itertools.count(1)


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """What of a call's context crosses to the worker: the ids, which capabilities the call
    has (each served over the link), the W3C trace headers of its span if traced, and the tag
    that names this call on the link (unique in this process)."""

    tag: int
    session_id: str | None
    request_id: str | None
    tool_call: ToolCall | None
    attempt: int
    turn: int | None
    capabilities: frozenset[str]
    trace: Mapping[str, str] | None

    @classmethod
    def of(cls, ctx: CallContext) -> RemoteCall:
        capabilities = frozenset(name for name in CAPABILITIES if getattr(ctx, name) is not None)
        return cls(next(_tags), ctx.session_id, ctx.request_id, ctx.tool_call, ctx.attempt,
                   ctx.turn, capabilities, trace_headers(ctx.trace_scope))


@dataclass(frozen=True, slots=True)
class Callback:
    """Stands for the ``index``-th callable argument of a request; the agent calls it back."""

    index: int


def link_closed(exc: BaseException) -> CapabilityError:
    """What a use of the link raises once the other end is gone (the worker died, the call
    was stopped, the agent exited): ``CapabilityError`` ``link_closed``."""
    return CapabilityError("link_closed", f"the link between the agent and the worker closed "
                                          f"({type(exc).__name__}): the call ended or the agent "
                                          "exited")


def transmit(conn: Connection, data: bytes) -> None:
    """Send ``data``; ``link_closed`` if the other end is gone."""
    try:
        conn.send_bytes(data)
    except (EOFError, OSError) as exc:
        raise link_closed(exc) from exc


def receive(conn: Connection) -> Any:
    """The next message; ``link_closed`` if the other end is gone. Only the agent's own
    workers (a private pipe, or a peer that passed the handshake) are read from."""
    try:
        data = conn.recv_bytes()
    except (EOFError, OSError) as exc:
        raise link_closed(exc) from exc
    return pickle.loads(data)


def send(conn: Connection, message: tuple[Any, ...]) -> None:
    """Send a reply; a value that cannot be pickled is sent as the error it raised."""
    try:
        data = pickle.dumps(message)
    except Exception as exc:
        data = pickle.dumps(("raised", portable(exc)))
    transmit(conn, data)


class ContextLink:
    """The worker's end of its link to the agent; :meth:`ask` is safe from any thread.

    ``connect`` opens the connection on first use (a Ray task connects only if its handler
    uses the context). The lock is reentrant: a callback the agent runs here may use the
    context again, and its requests nest inside the one that is waiting. Every request names
    its call by ``tag``: a thread a handler left behind cannot reach the next call's context.
    """

    def __init__(self, connect: Callable[[], Connection]) -> None:
        self._connect = connect
        self._conn: Connection | None = None
        self._lock = threading.RLock()

    def ask(self, tag: int, target: str, method: str, *args: Any) -> Any:
        """Perform ``target.method(*args)`` on the agent's side; its result, or its exception
        raised here. A request that cannot be pickled raises here, before anything is sent."""
        callbacks = [a for a in args if callable(a)]
        request = pickle.dumps(("ask", tag, target, method, tuple(
            Callback(callbacks.index(a)) if callable(a) else a for a in args)))
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            transmit(self._conn, request)
            return self._answer(self._conn, callbacks)

    def _answer(self, conn: Connection, callbacks: list[Callable[..., Any]]) -> Any:
        while True:
            kind, *rest = receive(conn)
            if kind == "done":
                return rest[0]
            if kind == "raised":
                raise rest[0]
            index, args = rest
            try:
                value = callbacks[index](*args)
            except Exception as exc:
                send(conn, ("raised", portable(exc)))
            else:
                send(conn, ("done", value))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _Asker:
    """What a proxy holds: the link and the tag of its call."""

    def __init__(self, link: ContextLink, tag: int) -> None:
        self._link = link
        self._tag = tag

    def _ask(self, target: str, method: str, *args: Any) -> Any:
        return self._link.ask(self._tag, target, method, *args)


class _RemoteState(_Asker):
    """The run's state, read and written in the agent (its writes are the call's writes)."""

    def get(self, key: str, default: Any = None) -> Any:
        return self._ask("state", "get", key, default)

    def set(self, key: str, value: Any) -> None:
        self._ask("state", "set", key, value)


class _RemoteSessions(_Asker):
    """The run's own view and its child sessions, served by the agent. An ``Agent`` object
    cannot cross to a worker: children here run on the calling agent (``agent=None``)."""

    def __init__(self, link: ContextLink, tag: int, keys: _RemoteKeys | None) -> None:
        super().__init__(link, tag)
        self.keys = keys

    def model(self) -> ModelInfo:
        info: ModelInfo = self._ask("sessions", "model")
        return info

    def snapshot_current(self) -> SessionSnapshot:
        snapshot: SessionSnapshot = self._ask("sessions", "snapshot_current")
        return snapshot

    def snapshot(self, run_id: str) -> SessionSnapshot:
        snapshot: SessionSnapshot = self._ask("sessions", "snapshot", run_id)
        return snapshot

    def tool_catalog(self) -> tuple[CatalogEntry, ...]:
        return tuple(self._ask("sessions", "tool_catalog"))

    def set_tool_membership(self, names: Iterable[str], present: bool) -> frozenset[str]:
        if isinstance(names, str):
            raise TypeError(f"names must be a collection of tool names, got the str {names!r}; "
                            f"pass [{names!r}]")
        return frozenset(self._ask("sessions", "set_tool_membership", list(names), present))

    def create_session(self, agent: Any = None, *,
                       state: Mapping[str, Any] | None = None) -> str:
        _local(agent)
        session: str = self._ask("sessions", "create_session", None, state)
        return session

    def start_turn(self, prompt: str | Sequence[Message], *, session: str | None = None,
                   agent: Any = None, state: Mapping[str, Any] | None = None) -> Any:
        _local(agent)
        return self._ask("sessions", "start_turn", prompt, session, None, state)

    def relay(self, outcome: Any) -> AskUser | Pending:
        if getattr(outcome, "keys", None) and self.keys is not None:
            self.keys.issue()  # the agent relays the key through this call's: take it here too
        relayed: AskUser | Pending = self._ask("sessions", "relay", outcome)
        return relayed

    def close_session(self, session: str) -> None:
        self._ask("sessions", "close_session", session)


def _local(agent: Any) -> None:
    """Only the calling agent hosts the children of a handler out of process."""
    if agent is not None:
        raise CapabilityError(
            "agent_not_reachable", "a handler in a worker process cannot name another Agent "
            "(it lives in the agent's process); start the child on the calling agent "
            "(agent=None), or run this tool with isolation='thread'")


class _RemoteKeys(_Asker):
    """Completion keys issued by the agent; remembers the key taken, for ``Pending``."""

    def __init__(self, link: ContextLink, tag: int) -> None:
        super().__init__(link, tag)
        self.issued: str | None = None

    def issue(self) -> str:
        key: str = self._ask("completion_keys", "issue")
        self.issued = key
        return key


class _RemoteDurable(_Asker):
    """Durable effects journaled by the agent; a step's ``fn`` runs here, called back."""

    def run_json(self, step_id: str, input: Any, fn: Callable[[Any], Any]) -> Any:
        return self._ask("durable", "run_json", step_id, input, fn)

    def external_event_key(self, name: str) -> str:
        key: str = self._ask("durable", "external_event_key", name)
        return key

    def await_event_json(self, key: str, timeout: float | None = None) -> Any:
        return self._ask("durable", "await_event_json", key, timeout)

    def emit_process_event(self, type: str, payload: Any = None) -> int:
        seq: int = self._ask("durable", "emit_process_event", type, payload)
        return seq


class _RemoteProgress(_Asker):
    """The call's progress sink in the agent: a report or a heartbeat is a sign of life there
    (the runner's idle deadline), and a report goes on to whoever watches the call."""

    def report(self, message: str, fraction: float | None) -> None:
        self._ask("progress", "report", message, fraction)

    def heartbeat(self) -> None:
        self._ask("progress", "heartbeat")


class _RemoteCompletions(_Asker):
    """Direct completions asked by the agent, through its model path; ``acomplete`` waits on
    the link as ``complete`` does (the worker's event loop runs this handler alone)."""

    def complete(self, request: ModelRequest | str, source: str | None = None
                 ) -> ModelResponse:
        response: ModelResponse = self._ask("direct_completions", "complete", request, source)
        return response

    async def acomplete(self, request: ModelRequest | str, source: str | None = None
                        ) -> ModelResponse:
        return self.complete(request, source)


class _RemoteToken(_Asker):
    """The call's cancel token, read from the agent; a call that ended or a link that closed
    reads as cancelled."""

    def __init__(self, link: ContextLink, tag: int) -> None:
        super().__init__(link, tag)
        self._set = False

    def is_set(self) -> bool:
        return self._ask_token("is_set")

    def wait(self, timeout: float | None = None) -> bool:
        return self._ask_token("wait", timeout)

    def _ask_token(self, method: str, *args: Any) -> bool:
        if not self._set:
            try:
                self._set = bool(self._ask("cancelled", method, *args))
            except OSError:  # the agent cannot be reached
                self._set = True
            except CapabilityError as exc:
                if exc.code not in ("link_closed", "call_finished"):
                    raise
                self._set = True
        return self._set


def remote_context(call: RemoteCall, link: ContextLink) -> CallContext:
    """The context a worker's handler gets for ``call``: capabilities served over ``link``."""
    has, tag = call.capabilities, call.tag
    keys = _RemoteKeys(link, tag) if "completion_keys" in has else None
    return CallContext(
        session_id=call.session_id, request_id=call.request_id, tool_call=call.tool_call,
        attempt=call.attempt, turn=call.turn, cancelled=_RemoteToken(link, tag),
        state=_RemoteState(link, tag) if "state" in has else None,
        sessions=_RemoteSessions(link, tag, keys) if "sessions" in has else None,
        completion_keys=keys,
        durable=_RemoteDurable(link, tag) if "durable" in has else None,
        direct_completions=_RemoteCompletions(link, tag) if "direct_completions" in has
        else NO_DIRECT_COMPLETIONS,
        progress=_RemoteProgress(link, tag) if "progress" in has else None,
        process_admin=RemoteProcesses(link, tag) if "process_admin" in has else None,
    )



@contextlib.contextmanager
def traced(call: RemoteCall, link: ContextLink) -> Iterator[None]:
    """Around the handler in the worker, for a traced call where ``opentelemetry`` is
    importable: the call's span is the current one, and the spans the handler makes go to
    the agent's trace over ``link`` (``_worker_tracing.py``), children of it."""
    if not call.trace:
        yield
        return
    try:
        from opentelemetry import context, propagate  # noqa: PLC0415
    except ImportError:
        yield
        return
    token = context.attach(propagate.extract(dict(call.trace)))
    try:
        with contextlib.ExitStack() as stack:
            if "trace_spans" in call.capabilities:
                from toolvisor.isolation._link._worker_tracing import forwarding  # noqa: PLC0415

                stack.enter_context(forwarding(link, call.tag))
            yield
    finally:
        context.detach(token)
