"""Child specs: how a supervisor starts, restarts and stops one child (OTP's child_spec)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pykka import ActorRef

from toolvisor.supervisors._errors import ChildSpecError

Restart = Literal["permanent", "transient", "temporary"]
ChildType = Literal["worker", "supervisor"]
ChildState = Literal["running", "restarting", "stopped"]
Shutdown = float | Literal["brutal_kill"]

_RESTARTS = ("permanent", "transient", "temporary")
_TYPES = ("worker", "supervisor")


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One child of a :class:`~toolvisor.supervisors.Supervisor`.

    * ``id``: unique among the supervisor's children (any hashable, usually a string).
    * ``start``: called with no arguments in the supervisor's thread; must start a
      ``SupervisedActor`` and return its ``ActorRef`` (``lambda: Worker.start(...)``).
    * ``restart``: ``permanent`` (always restarted), ``transient`` (restarted only after an
      abnormal exit: anything but ``normal`` and ``shutdown``), ``temporary`` (never restarted,
      and forgotten once it exits or is terminated).
    * ``shutdown``: seconds the child gets to stop (``math.inf`` waits forever), or
      ``"brutal_kill"``: no wait at all. A thread cannot be killed: a child still running past
      its grace is abandoned. Default: 5.0 for a worker, ``math.inf`` for a supervisor (as in
      OTP, a supervisor gets all the time its own children's shutdowns take).
    * ``type``: ``worker`` or ``supervisor`` (counted apart by ``count_children``).
    * ``start_timeout``: seconds the child's ``on_start`` may take. The supervisor starts the
      next child only once it has returned (OTP's synchronous ``start_link``); one that raises
      or takes longer fails the start with ``ChildStartError``. Default: 5.0 for a worker,
      ``math.inf`` for a supervisor (its ``on_start`` starts its own children).
    """

    id: Hashable
    start: Callable[[], ActorRef[Any]]
    restart: Restart = "permanent"
    shutdown: Shutdown | None = None
    type: ChildType = "worker"
    start_timeout: float | None = None

    def __post_init__(self) -> None:
        try:
            hash(self.id)
        except TypeError:
            raise ChildSpecError(
                f"child id must be hashable (a string, say), got {self.id!r}"
            ) from None
        if not callable(self.start):
            raise ChildSpecError(
                f"child {self.id!r}: start must be a callable returning an ActorRef, "
                f"got {self.start!r}"
            )
        if self.restart not in _RESTARTS:
            raise ChildSpecError(
                f"child {self.id!r}: restart must be one of {list(_RESTARTS)}, "
                f"got {self.restart!r}"
            )
        if self.type not in _TYPES:
            raise ChildSpecError(
                f"child {self.id!r}: type must be one of {list(_TYPES)}, got {self.type!r}"
            )
        default = math.inf if self.type == "supervisor" else 5.0
        if self.shutdown is None:
            object.__setattr__(self, "shutdown", default)
        check_shutdown(self.shutdown, f"child {self.id!r}: shutdown")
        if self.start_timeout is None:
            object.__setattr__(self, "start_timeout", default)
        timeout = self.start_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
                or not timeout > 0:
            raise ChildSpecError(
                f"child {self.id!r}: start_timeout must be a number of seconds > 0 (math.inf "
                f"for no limit) or None for the default, got {timeout!r}"
            )

    @property
    def grace(self) -> Shutdown:
        """The resolved ``shutdown`` (never ``None`` once the spec is built)."""
        return 5.0 if self.shutdown is None else self.shutdown

    @property
    def start_limit(self) -> float:
        """The resolved ``start_timeout`` (never ``None`` once the spec is built)."""
        return 5.0 if self.start_timeout is None else self.start_timeout


def check_shutdown(shutdown: object, what: str) -> None:
    """Raise :class:`ChildSpecError` unless ``shutdown`` is a grace or ``"brutal_kill"``."""
    if shutdown == "brutal_kill":
        return
    valid = (
        isinstance(shutdown, int | float)
        and not isinstance(shutdown, bool)
        and not math.isnan(shutdown)
        and shutdown >= 0
    )
    if not valid:
        raise ChildSpecError(
            f"{what} must be a grace in seconds (>= 0, math.inf for no limit) or "
            f"'brutal_kill', got {shutdown!r}"
        )


class ChildInfo(NamedTuple):
    """One row of ``which_children()``: OTP's ``{Id, Child, Type, Modules}``, with the restart
    type in place of the modules. ``ref`` is ``None`` while the child is not running; ``state``
    is OTP's ``Child``: ``running`` (a ref), ``restarting`` (its last restart failed and is
    tried again), or ``stopped`` (OTP's ``undefined``)."""

    id: Hashable
    ref: ActorRef[Any] | None
    type: ChildType
    restart: Restart
    state: ChildState = "running"
