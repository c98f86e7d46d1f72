"""``Supervisor``: OTP's static supervisor as a pykka actor (which is itself supervisable)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal

import pykka
from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor.supervisors._errors import (
    ChildRestartingError,
    ChildRunningError,
    ChildSpecError,
    ChildStartError,
    DuplicateChildError,
    UnknownChildError,
)
from toolvisor.supervisors._intensity import Clock, RestartIntensity
from toolvisor.supervisors._shutdown import stop_child
from toolvisor.supervisors._spec import ChildInfo, ChildSpec, ChildState
from toolvisor.supervisors._start import start_synchronously
from toolvisor.supervisors._supervised import (
    NORMAL_REASONS,
    ChildLink,
    StartAck,
    SupervisedActor,
    describe,
)

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
_STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one")
SupervisorEventHook = Callable[[str, dict[str, Any]], None]
"""``on_event(event, fields)``: a supervisor's restarts, told to whoever traces them."""


@dataclass(eq=False, slots=True)
class _Child:
    """A child's spec and current incarnation; owned by the supervisor's thread."""

    spec: ChildSpec
    ref: ActorRef[Any] | None = None
    link: ChildLink | None = None
    restarts: int = 0
    restarting: bool = False  # a failed restart waits for its _TryAgainRestart

    @property
    def state(self) -> ChildState:
        if self.ref is not None:
            return "running"
        return "restarting" if self.restarting else "stopped"


@dataclass(frozen=True, slots=True)
class _ChildExited:
    link: ChildLink


@dataclass(frozen=True, slots=True)
class _TryAgainRestart:
    child_id: Hashable
    reason: str


@dataclass(frozen=True, slots=True)
class _WhichChildren:
    pass


@dataclass(frozen=True, slots=True)
class _CountChildren:
    pass


@dataclass(frozen=True, slots=True)
class _StartChild:
    spec: ChildSpec


@dataclass(frozen=True, slots=True)
class _TerminateChild:
    child_id: Hashable


@dataclass(frozen=True, slots=True)
class _RestartChild:
    child_id: Hashable


@dataclass(frozen=True, slots=True)
class _DeleteChild:
    child_id: Hashable


def _tell_exited(supervisor: ActorRef[Any], link: ChildLink) -> None:
    """Runs in the exiting child's thread: queue the exit notice for the supervisor."""
    with suppress(ActorDeadError):
        supervisor.tell(_ChildExited(link))


class SupervisorRef(ActorRef["Supervisor"]):
    """The handle of a running :class:`Supervisor`: an ``ActorRef`` with blocking OTP calls.

    Each call is one ``ask`` through the supervisor's mailbox, so it is ordered after every
    message already queued there (exit notices included). Calls on a stopped supervisor raise
    ``pykka.ActorDeadError``. ``stop()`` (from ``ActorRef``) stops the children in reverse start
    order, each within its grace, before it returns.
    """

    def which_children(self) -> list[ChildInfo]:
        """One :class:`ChildInfo` per child spec, in start order."""
        result: list[ChildInfo] = self.ask(_WhichChildren(), block=True)
        return result

    def count_children(self) -> dict[str, int]:
        """``specs``, ``active`` (running), ``supervisors``, ``workers`` as in OTP, plus
        ``abandoned``: children given up on after their grace, ever, by this supervisor."""
        result: dict[str, int] = self.ask(_CountChildren(), block=True)
        return result

    def start_child(self, spec: ChildSpec) -> ActorRef[Any]:
        """Add ``spec`` as the last child and start it; return once its ``on_start`` returned.

        Raises :class:`DuplicateChildError` if the id is taken, :class:`ChildStartError` if the
        start function fails or the child's ``on_start`` raises or outlasts the spec's
        ``start_timeout`` (the spec is then not kept).
        """
        ref: ActorRef[Any] = self.ask(_StartChild(spec), block=True)
        return ref

    def terminate_child(self, child_id: Hashable) -> None:
        """Stop the child (grace, then abandon); its spec stays unless it is ``temporary``."""
        self.ask(_TerminateChild(child_id), block=True)

    def restart_child(self, child_id: Hashable) -> ActorRef[Any]:
        """Start a stopped child again from its spec (:class:`ChildRunningError` if running,
        :class:`ChildRestartingError` if its supervisor is already trying to)."""
        ref: ActorRef[Any] = self.ask(_RestartChild(child_id), block=True)
        return ref

    def delete_child(self, child_id: Hashable) -> None:
        """Forget a stopped child's spec (:class:`ChildRunningError` if running,
        :class:`ChildRestartingError` if restarting)."""
        self.ask(_DeleteChild(child_id), block=True)


class Supervisor(SupervisedActor, pykka.ThreadingActor):
    """OTP's supervisor on pykka. Start it with :meth:`start`; it is itself a ``SupervisedActor``,
    so ``ChildSpec(id, lambda: Supervisor.start(...), type="supervisor")`` nests it.

    Guarantees:

    * Children start in list order, each only once the one before it has started: its
      ``on_start`` has returned (OTP's synchronous ``start_link``), so start order is a
      dependency order. The supervisor is running only once every child has started. A start
      function that raises, or a child whose ``on_start`` raises or outlasts the spec's
      ``start_timeout``, makes :meth:`start` raise :class:`ChildStartError` naming the child,
      after the children already started have been stopped in reverse order.
    * When a child exits, the supervisor restarts according to the strategy and the restart
      types: ``one_for_one`` restarts that child; ``one_for_all`` stops all other children in
      reverse start order and starts all of them again in start order; ``rest_for_one`` does the
      same for the children started after it. ``temporary`` children are never restarted (not
      even as siblings: stopping them forgets them); ``transient`` ones only after an abnormal
      exit (not ``normal`` or ``shutdown``) of their own. A restart whose start function fails
      counts as a restart and is tried again (a message to itself, so calls queued meanwhile
      are served in between) until it works or the intensity is exceeded; meanwhile the child
      is ``restarting``: ``restart_child`` and ``delete_child`` refuse it, ``terminate_child``
      stops the retries and leaves it stopped.
    * More than ``max_restarts`` restarts within ``max_seconds`` (of ``clock``): the supervisor
      stops all children in reverse start order and exits with reason ``shutdown``, for its own
      supervisor to handle.
    * Stopping the supervisor (``stop()``, its own supervisor, or exceeding the intensity)
      stops every child in reverse start order, each within its grace; a child still running
      past its grace is abandoned (``on_abandon`` called, ``child_abandoned`` logged, counted)
      and never waited for again.

    All of the supervisor's state is owned by its own thread; everyone else talks to it through
    its mailbox (:class:`SupervisorRef`).
    """

    use_daemon_thread = True  # no toolvisor thread keeps the interpreter alive

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy,
        max_restarts: int,
        max_seconds: float,
        clock: Clock,
        name: str | None,
        on_give_up: Callable[[], None] | None,
        on_event: SupervisorEventHook | None,
    ) -> None:
        if strategy not in _STRATEGIES:
            raise ChildSpecError(
                f"strategy must be one of {list(_STRATEGIES)}, got {strategy!r}"
            )
        intensity = RestartIntensity(max_restarts, max_seconds, clock)
        specs = list(children)
        seen: set[Hashable] = set()
        for spec in specs:
            if not isinstance(spec, ChildSpec):
                raise ChildSpecError(f"children must be ChildSpec objects, got {spec!r}")
            if spec.id in seen:
                raise ChildSpecError(f"two children have the id {spec.id!r}: ids must be unique")
            seen.add(spec.id)
        super().__init__()
        self._actor_ref = SupervisorRef(self)
        self._strategy: Strategy = strategy
        self._intensity = intensity
        self._children = [_Child(spec) for spec in specs]
        self._abandoned = 0
        # Started by a supervisor, the link brought the ack that supervisor waits on; started
        # on its own, start() waits on one of its own.
        self._waits_for_itself = self._start_ack is None
        if self._start_ack is None:
            self._start_ack = StartAck()
        self._notify = functools.partial(_tell_exited, self._actor_ref)
        self._name = name or f"supervisor-{self.actor_urn[-12:]}"
        self._log = get_event_log("supervisor", supervisor_id=self._name)
        self._on_give_up = on_give_up
        self._on_event = on_event

    @classmethod
    def start(  # OTP's start_link: keyword settings, a richer ref
        cls,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        clock: Clock = time.monotonic,
        name: str | None = None,
        on_give_up: Callable[[], None] | None = None,
        on_event: SupervisorEventHook | None = None,
    ) -> SupervisorRef:
        """Start the supervisor and its children; return once they are all running (when a
        supervisor starts this one, that supervisor waits for them instead, within the spec's
        ``start_timeout``).

        ``on_give_up`` is called in the supervisor's thread when it exceeds its intensity,
        before it stops its children and exits: how whoever owns what the children served
        learns that nothing will restart them (what it raises is logged and ignored).

        ``on_event(event, fields)`` is told each ``child_restarted`` and the
        ``restart_intensity_exceeded``, with the fields of their log events and
        ``supervisor_id``, in the supervisor's thread and just before the event is logged (a
        tracer records restarts with it; what it raises is logged and ignored).

        Raises :class:`ChildSpecError` for invalid settings and :class:`ChildStartError` if a
        child fails to start (the supervisor has then stopped its other children and exited);
        ``pykka.ActorDeadError`` if it exited during start for another reason (a start function
        raised a ``BaseException``, say).
        """
        ref = super().start(
            children,
            strategy=strategy,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
            clock=clock,
            name=name,
            on_give_up=on_give_up,
            on_event=on_event,
        )
        assert isinstance(ref, SupervisorRef)
        actor = ref._actor_weakref()
        started = actor._start_ack if actor is not None and actor._waits_for_itself else None
        if started is not None:
            started.done.wait()
            error = started.error
            if isinstance(error, ChildStartError):
                raise ChildStartError(error.child_id, error.detail) from error.__cause__
            if error is not None:
                raise ActorDeadError(
                    f"{ref} exited before its children were started: {describe(error)}"
                )
        return ref

    # --- lifecycle (the supervisor's thread) ---

    def on_start(self) -> None:
        try:
            for child in self._children:
                self._start_child(child)
        except ChildStartError:
            self._terminate_all()
            raise

    def on_stop(self) -> None:
        self._terminate_all()

    def _report_exit(self) -> None:
        if not self._exit_reported:
            self._terminate_all()
            reason = describe(self._current_exit_reason())
            self._log.info("supervisor_stopped", reason=reason, abandoned=self._abandoned)
        super()._report_exit()

    def on_receive(self, message: Any) -> Any:
        match message:
            case _ChildExited(link):
                self._child_exited(link)
            case _TryAgainRestart(child_id, reason):
                child = self._find(child_id)
                if child is not None and child.restarting:  # not terminated meanwhile
                    child.restarting = False
                    self._restart(child, reason)
            case _WhichChildren():
                return [
                    ChildInfo(c.spec.id, c.ref, c.spec.type, c.spec.restart, c.state)
                    for c in self._children
                ]
            case _CountChildren():
                return self._count()
            case _StartChild(spec):
                return self._add_child(spec)
            case _TerminateChild(child_id):
                self._terminate(self._get(child_id))
            case _RestartChild(child_id):
                return self._restart_stopped(self._get(child_id))
            case _DeleteChild(child_id):
                child = self._get(child_id)
                if child.ref is not None:
                    raise ChildRunningError(
                        f"child {child_id!r} is running: terminate_child it first"
                    )
                self._refuse_restarting(child)
                self._children.remove(child)
            case _:
                return super().on_receive(message)
        return None

    # --- children ---

    def _find(self, child_id: Hashable) -> _Child | None:
        return next((c for c in self._children if c.spec.id == child_id), None)

    def _get(self, child_id: Hashable) -> _Child:
        child = self._find(child_id)
        if child is None:
            known = [c.spec.id for c in self._children]
            raise UnknownChildError(f"no child with id {child_id!r}; known ids: {known}")
        return child

    def _start_child(self, child: _Child) -> ActorRef[Any]:
        spec = child.spec
        link, ref = start_synchronously(self._notify, spec.start, spec.id, spec.start_limit,
                                        self._log)
        child.ref, child.link = ref, link
        self._log.info("child_started", child_id=child.spec.id, child_urn=ref.actor_urn)
        return ref

    def _refuse_restarting(self, child: _Child) -> None:
        if child.restarting:
            raise ChildRestartingError(
                f"child {child.spec.id!r} is restarting (its last restart failed and is tried "
                f"again): terminate_child it first to stop the retries"
            )

    def _terminate(self, child: _Child) -> None:
        """Stop the child if it runs, or its pending restart; forget it if temporary. Its late
        exit notice is stale."""
        ref, link = child.ref, child.link
        child.ref = child.link = None
        child.restarting = False
        if (
            ref is not None
            and link is not None
            and not stop_child(link, ref, child.spec.grace, self._log, child.spec.id)
        ):
            self._abandoned += 1
        if child.spec.restart == "temporary":
            self._children.remove(child)

    def _terminate_all(self) -> None:
        for child in reversed(list(self._children)):
            self._terminate(child)

    def _child_exited(self, link: ChildLink) -> None:
        child = next((c for c in self._children if c.link is link), None)
        if child is None:
            return  # an incarnation already terminated or replaced
        assert child.ref is not None
        self._log.info(
            "child_exited",
            child_id=child.spec.id,
            child_urn=child.ref.actor_urn,
            reason=describe(link.reason),
        )
        child.ref = child.link = None
        restart = child.spec.restart
        if restart == "temporary":
            self._children.remove(child)
        elif restart == "permanent" or link.reason not in NORMAL_REASONS:
            self._restart(child, describe(link.reason))

    def _tell(self, event: str, fields: dict[str, Any]) -> None:
        """Tell ``on_event`` (if any), then log the event: once it is logged, it was told."""
        if self._on_event is not None:
            try:
                self._on_event(event, {"supervisor_id": self._name, **fields})
            except Exception as exc:
                self._log.error("event_callback_failed", error=f"{type(exc).__name__}: {exc}")
        log = self._log.error if event == "restart_intensity_exceeded" else self._log.info
        log(event, **fields)

    def _restart(self, child: _Child, reason: str) -> None:
        """Apply the strategy after ``child`` stopped (``reason``: why), or give up past the
        intensity."""
        if not self._intensity.add_restart():
            self._tell("restart_intensity_exceeded", {
                "child_id": child.spec.id, "reason": reason,
                "max_restarts": self._intensity.max_restarts,
                "max_seconds": self._intensity.max_seconds})
            self._record_exit_reason("shutdown")
            if self._on_give_up is not None:
                try:
                    self._on_give_up()
                except Exception as exc:
                    self._log.error("give_up_callback_failed",
                                    error=f"{type(exc).__name__}: {exc}")
            self._stop()
            return
        if self._strategy == "one_for_one":
            group = [child]
        elif self._strategy == "one_for_all":
            group = list(self._children)
        else:
            group = self._children[self._children.index(child) :]
        for sibling in reversed(group):
            self._terminate(sibling)
        for member in group:
            if member not in self._children:
                continue  # a temporary sibling, forgotten when stopped
            try:
                ref = self._start_child(member)
            except ChildStartError as error:
                self._log.error(
                    "child_start_failed", child_id=member.spec.id, error=error.detail
                )
                member.restarting = True
                self.actor_ref.tell(_TryAgainRestart(member.spec.id, reason))
                return
            member.restarts += 1
            self._tell("child_restarted", {
                "child_id": member.spec.id, "child_urn": ref.actor_urn,
                "reason": reason if member is child else f"sibling {child.spec.id!r}: {reason}",
                "restarts": member.restarts})

    def _restart_stopped(self, child: _Child) -> ActorRef[Any]:
        if child.ref is not None:
            raise ChildRunningError(f"child {child.spec.id!r} is already running")
        self._refuse_restarting(child)
        return self._start_child(child)

    def _add_child(self, spec: ChildSpec) -> ActorRef[Any]:
        if not isinstance(spec, ChildSpec):
            raise ChildSpecError(f"start_child needs a ChildSpec, got {spec!r}")
        existing = self._find(spec.id)
        if existing is not None:
            state = {"running": "running", "restarting": "present and restarting",
                     "stopped": "present but stopped"}[existing.state]
            raise DuplicateChildError(
                f"child {spec.id!r} is already {state}: use another id, or "
                f"restart_child / delete_child"
            )
        child = _Child(spec)
        ref = self._start_child(child)
        self._children.append(child)
        return ref

    def _count(self) -> dict[str, int]:
        supervisors = sum(1 for c in self._children if c.spec.type == "supervisor")
        return {
            "specs": len(self._children),
            # OTP counts a child as active only if its process is alive: one that died and
            # whose exit notice is still queued behind this call is not.
            "active": sum(1 for c in self._children if c.ref is not None and c.ref.is_alive()),
            "supervisors": supervisors,
            "workers": len(self._children) - supervisors,
            "abandoned": self._abandoned,
        }
