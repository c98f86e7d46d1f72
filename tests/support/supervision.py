"""The children the supervisor tests supervise: a ``Worker`` that journals its start and
stop, its spec, and how a test reads and ends a supervisor's children."""

from __future__ import annotations

import threading
from typing import Any

import pykka

from tests.support.events import Events
from toolvisor.supervisors import ChildSpec, SupervisedActor, SupervisorRef


class Worker(SupervisedActor, pykka.ThreadingActor):
    """A child that journals its start and stop, and crashes, stops or blocks on request."""

    def __init__(self, name: str, journal: list[tuple[str, str]] | None = None) -> None:
        super().__init__()
        self.name = name
        self.journal = journal if journal is not None else []
        self.abandoned = threading.Event()

    def on_start(self) -> None:
        self.journal.append(("start", self.name))

    def on_stop(self) -> None:
        self.journal.append(("stop", self.name))

    def on_abandon(self) -> None:
        self.abandoned.set()

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise ValueError(f"{self.name} crashed")
        if message == "exit":
            raise SystemExit(7)
        if message == "stop":
            self.stop()
        if isinstance(message, tuple) and message[0] == "block":
            _, entered, release = message
            entered.set()
            release.wait()
        return message


def spec(name: str, journal: list[tuple[str, str]] | None = None, **options: Any) -> ChildSpec:
    return ChildSpec(name, lambda: Worker.start(name, journal), **options)


def refs(supervisor: SupervisorRef) -> dict[Any, pykka.ActorRef[Any] | None]:
    return {info.id: info.ref for info in supervisor.which_children()}


def end_child(supervisor: SupervisorRef, events: Events, child_id: str, how: str) -> None:
    """Make the child exit (``crash``, ``stop``, ``exit``) and wait until its supervisor has
    handled the exit: the next call on ``supervisor`` is ordered after that handling."""
    ref = refs(supervisor)[child_id]
    assert ref is not None
    ref.tell(how)
    events.wait_for("child_exited", child_urn=ref.actor_urn)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now
