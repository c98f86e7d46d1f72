"""``DynamicSupervisor``: a supervisor of temporary children started on demand (in toolvisor,
one per tool call).

OTP's ``simple_one_for_one``, named as Elixir names it, shaped for a hot path: a child
is started in the CALLER's thread and admitted through a lock-guarded table, with no round trip
through the supervisor's mailbox. Its children are never restarted, so the supervisor's own
thread has only one job: stopping the live children when it stops.

Unlike ``Supervisor`` (and OTP), ``start_child`` does not wait for the child's ``on_start``: a
``ToolCallActor``'s ``on_start`` runs its call, so waiting would run a batch one call at a time,
and these children are temporary and independent, so there is no start order to keep and an
``on_start`` that raises is simply the child's exit (never a restart).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pykka
from pykka import ActorDeadError, ActorRef

from toolvisor._logging import EventLog, get_event_log
from toolvisor.supervisors._errors import ChildSpecError, ChildStartError, TooManyChildrenError
from toolvisor.supervisors._shutdown import abandon, await_exit
from toolvisor.supervisors._spec import ChildInfo, Shutdown, check_shutdown
from toolvisor.supervisors._supervised import (
    ChildLink,
    SupervisedActor,
    describe,
    request_shutdown,
    start_linked,
)


class _ChildTable:
    """The live children of one ``DynamicSupervisor``, shared by three kinds of thread:

    starters (``start_child`` callers) reserve a slot, then fill it with the ref; each child's
    own thread removes its slot when it exits (possibly before the ref was filled in); the
    supervisor's thread closes the table when it stops. Every access holds ``_lock``.
    """

    def __init__(self, max_children: int, log: EventLog) -> None:
        self._lock = threading.Lock()
        self._slots: dict[ChildLink, ActorRef[Any] | None] = {}  # None: still starting
        self._closed = False
        self._abandoned = 0
        self.max_children = max_children
        self.log = log

    def reserve(self, link: ChildLink) -> None:
        with self._lock:
            if self._closed:
                raise ActorDeadError("the DynamicSupervisor has stopped: no new children")
            if len(self._slots) >= self.max_children:
                raise TooManyChildrenError(
                    f"the DynamicSupervisor already has max_children={self.max_children} "
                    f"children: wait for some to finish, or start it with a larger max_children"
                )
            self._slots[link] = None

    def fill(self, link: ChildLink, ref: ActorRef[Any]) -> bool:
        """Record the started child; ``False`` if the table closed meanwhile (the starter must
        then stop the child, which the supervisor's shutdown did not see)."""
        with self._lock:
            if self._closed:
                self._slots.pop(link, None)
                return False
            if link in self._slots:
                self._slots[link] = ref
            return True

    def release(self, link: ChildLink) -> None:
        with self._lock:
            self._slots.pop(link, None)

    def child_exited(self, link: ChildLink) -> None:
        """The link's notify: runs in the exiting child's thread."""
        with self._lock:
            known = self._slots.pop(link, False) is not False
        if known and link.actor is not None:
            self.log.info(
                "child_exited", child_urn=link.actor.actor_urn, reason=describe(link.reason)
            )

    def close(self) -> list[tuple[ChildLink, ActorRef[Any]]]:
        """Refuse new children; return the live ones (the starting ones are their starters')."""
        with self._lock:
            self._closed = True
            return [(link, ref) for link, ref in self._slots.items() if ref is not None]

    def forget_abandoned(self, link: ChildLink) -> None:
        with self._lock:
            self._slots.pop(link, None)
            self._abandoned += 1

    def count(self) -> dict[str, int]:
        with self._lock:
            live = len(self._slots)
            return {
                "specs": live,
                "active": live,
                "supervisors": 0,
                "workers": live,
                "abandoned": self._abandoned,
            }

    def refs(self) -> list[ActorRef[Any]]:
        with self._lock:
            return [ref for ref in self._slots.values() if ref is not None]


class DynamicSupervisorRef(ActorRef["DynamicSupervisor"]):
    """The handle of a running :class:`DynamicSupervisor`.

    ``start_child``, ``count_children`` and ``which_children`` run in the caller's thread
    against the supervisor's child table (thread-safe, no mailbox round trip). ``stop()``
    stops the live children (all at once, each within the grace) before it returns.
    """

    def __init__(self, actor: DynamicSupervisor) -> None:
        super().__init__(actor)
        self._table = actor.child_table
        self._child_exited = self._table.child_exited  # every link's notify, made once
        self._shutdown = actor.child_shutdown

    def start_child(self, start: Callable[[], ActorRef[Any]]) -> ActorRef[Any]:
        """Call ``start`` in this thread and supervise the ``SupervisedActor`` it returns.

        Returns without waiting for the child's ``on_start`` (see the module's docstring): one
        that raises ends the child with that reason. The child is ``temporary``: never
        restarted, forgotten when it exits. Raises
        :class:`TooManyChildrenError` at once (nothing queued) when ``max_children`` children
        are live or starting, :class:`ChildStartError` if ``start`` fails, and
        ``pykka.ActorDeadError`` once the supervisor has stopped.
        """
        link = ChildLink(self._child_exited)
        self._table.reserve(link)
        try:
            ref = start_linked(link, start)
        except Exception as exc:
            self._table.release(link)
            raise ChildStartError(None, repr(exc)) from exc
        except BaseException:
            self._table.release(link)
            raise
        if not self._table.fill(link, ref):
            request_shutdown(ref)
            if not await_exit(link, self._shutdown):
                abandon(link, self._table.log, None, ref)
            raise ActorDeadError("the DynamicSupervisor stopped while the child was starting")
        if self._table.log.enabled:  # no event's fields built per call when none is taken
            self._table.log.debug("child_started", child_urn=ref.actor_urn)
        return ref

    def count_children(self) -> dict[str, int]:
        """``specs`` = ``active`` = ``workers`` = live or starting children (as Elixir's
        ``DynamicSupervisor``), ``supervisors`` = 0, plus ``abandoned`` (ever)."""
        return self._table.count()

    def which_children(self) -> list[ChildInfo]:
        """The live children (id ``None``, as OTP's dynamic children have no id)."""
        return [ChildInfo(None, ref, "worker", "temporary") for ref in self._table.refs()]


class DynamicSupervisor(SupervisedActor, pykka.ThreadingActor):
    """A dynamic supervisor: ``temporary`` children started on demand, at most
    ``max_children`` at a time. Start it with :meth:`start`; it is a ``SupervisedActor``, so
    ``ChildSpec("tool_calls", lambda: DynamicSupervisor.start(...), type="supervisor")``
    places it in a supervision tree.

    When it stops (``stop()``, its supervisor, a failure), it refuses new children, asks every
    live child to stop, waits for each up to ``shutdown`` seconds from that moment, and
    abandons the rest (``on_abandon``, ``child_abandoned``, counted).
    """

    use_daemon_thread = True  # no toolvisor thread keeps the interpreter alive

    def __init__(self, *, max_children: int, shutdown: Shutdown, name: str | None) -> None:
        if isinstance(max_children, bool) or not isinstance(max_children, int) or max_children < 1:
            raise ChildSpecError(f"max_children must be an int >= 1, got {max_children!r}")
        check_shutdown(shutdown, "shutdown")
        super().__init__()
        self._name = name or f"tool-calls-{self.actor_urn[-12:]}"
        self._log = get_event_log("supervisor", supervisor_id=self._name)
        self.child_table = _ChildTable(max_children, self._log)
        self.child_shutdown: Shutdown = shutdown
        self._actor_ref = DynamicSupervisorRef(self)

    @classmethod
    def start(  # a richer ref than pykka's
        cls,
        *,
        max_children: int = 1024,
        shutdown: Shutdown = 5.0,
        name: str | None = None,
    ) -> DynamicSupervisorRef:
        """Start an empty dynamic supervisor; ``shutdown`` is the grace of every child."""
        ref = super().start(max_children=max_children, shutdown=shutdown, name=name)
        assert isinstance(ref, DynamicSupervisorRef)
        return ref

    def on_stop(self) -> None:
        self._stop_children()

    def _report_exit(self) -> None:
        if not self._exit_reported:
            self._stop_children()
            self._log.info(
                "supervisor_stopped",
                reason=describe(self._current_exit_reason()),
                abandoned=self.child_table.count()["abandoned"],
            )
        super()._report_exit()

    def _stop_children(self) -> None:
        live = self.child_table.close()
        for _, ref in live:
            request_shutdown(ref)
        grace = self.child_shutdown
        deadline = time.monotonic() + (0.0 if grace == "brutal_kill" else grace)
        for link, ref in live:
            if not await_exit(link, grace, timeout=max(0.0, deadline - time.monotonic())):
                self.child_table.forget_abandoned(link)
                abandon(link, self._log, None, ref)
