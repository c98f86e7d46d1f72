"""OTP's synchronous start: a child has started once its ``on_start`` has returned, so start
order is a dependency order; one whose ``on_start`` raises or hangs fails the start, named."""

from __future__ import annotations

import math
import threading
from typing import Any

import pykka
import pytest

from tests.support.events import WAIT, Events
from tests.support.supervision import Worker, refs, spec
from toolvisor.supervisors import (
    ChildSpec,
    ChildSpecError,
    ChildStartError,
    DynamicSupervisor,
    SupervisedActor,
    Supervisor,
)


class Ready(SupervisedActor, pykka.ThreadingActor):
    """Records, in ``on_start``, which of its siblings were ready before it."""

    def __init__(self, name: str, ready: list[str], seen: dict[str, list[str]]) -> None:
        super().__init__()
        self.name, self.ready, self.seen = name, ready, seen

    def on_start(self) -> None:
        self.seen[self.name] = list(self.ready)
        self.ready.append(self.name)


class WaitsForNext(SupervisedActor, pykka.ThreadingActor):
    """An ``on_start`` that returns only once the next sibling exists, or it is abandoned."""

    def __init__(self, next_built: threading.Event) -> None:
        super().__init__()
        self.next_built = next_built

    def on_start(self) -> None:
        self.next_built.wait(WAIT)

    def on_abandon(self) -> None:
        self.next_built.set()  # its cancellation: on_start returns, the shutdown is handled


class Next(SupervisedActor, pykka.ThreadingActor):
    def __init__(self, built: threading.Event) -> None:
        super().__init__()
        built.set()


class FailsToStart(SupervisedActor, pykka.ThreadingActor):
    def on_start(self) -> None:
        raise RuntimeError("bad start")


def test_each_child_starts_once_the_one_before_it_is_ready() -> None:
    ready: list[str] = []
    seen: dict[str, list[str]] = {}
    supervisor = Supervisor.start([
        ChildSpec(n, lambda n=n: Ready.start(n, ready, seen)) for n in "abc"
    ])
    assert seen == {"a": [], "b": ["a"], "c": ["a", "b"]}
    assert supervisor.stop()


def test_the_next_child_is_not_built_while_on_start_runs_and_a_hang_fails_the_start(
    events: Events,
) -> None:
    next_built = threading.Event()
    started: list[pykka.ActorRef[Any]] = []

    def waits() -> pykka.ActorRef[Any]:
        started.append(WaitsForNext.start(next_built))
        return started[-1]

    with pytest.raises(ChildStartError, match=r"child 'a' failed to start: its on_start did "
                                              r"not return within 0.2 s") as caught:
        Supervisor.start([ChildSpec("a", waits, start_timeout=0.2),
                          ChildSpec("b", lambda: Next.start(next_built))])
    assert caught.value.child_id == "a"
    assert ("child_abandoned", "a") in events.named()  # abandoned: on_abandon released it
    assert started[0].actor_stopped.wait(WAIT)
    assert pykka.ActorRegistry.get_by_class(Next) == []  # b was never built


def test_an_on_start_that_raises_fails_the_supervisor_start_naming_the_child() -> None:
    journal: list[tuple[str, str]] = []
    with pytest.raises(ChildStartError, match=r"child 'b' failed to start: its on_start "
                                              r"raised RuntimeError\('bad start'\)") as caught:
        Supervisor.start([spec("a", journal), ChildSpec("b", FailsToStart.start),
                          spec("c", journal)])
    assert caught.value.child_id == "b"
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert journal == [("start", "a"), ("stop", "a")]  # c never started, a stopped
    assert pykka.ActorRegistry.get_by_class(FailsToStart) == []


def test_start_child_whose_on_start_raises_is_refused_and_not_kept() -> None:
    supervisor = Supervisor.start([spec("a")])
    with pytest.raises(ChildStartError, match="child 'x' failed to start: its on_start raised"):
        supervisor.start_child(ChildSpec("x", FailsToStart.start))
    assert [info.id for info in supervisor.which_children()] == ["a"]
    assert supervisor.count_children()["specs"] == 1
    assert supervisor.stop()


def test_a_supervisor_child_is_started_once_its_own_children_are() -> None:
    journal: list[tuple[str, str]] = []

    def inner() -> pykka.ActorRef[Any]:
        return Supervisor.start([spec("w", journal), ChildSpec("bad", FailsToStart.start)])

    with pytest.raises(ChildStartError, match=r"child 'inner' failed to start: its on_start "
                                              r"raised ChildStartError.*child 'bad' failed"):
        Supervisor.start([ChildSpec("inner", inner, type="supervisor"), spec("after", journal)])
    assert journal == [("start", "w"), ("stop", "w")]


class FlakyStart(SupervisedActor, pykka.ThreadingActor):
    """Its ``on_start`` fails on the second and third incarnation."""

    def __init__(self, attempts: list[int]) -> None:
        super().__init__()
        attempts.append(1)
        self.attempt = len(attempts)

    def on_start(self) -> None:
        if self.attempt in (2, 3):
            raise OSError("not yet")

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise ValueError("crashed")
        return message


def test_a_restart_whose_on_start_raises_counts_and_is_tried_again(events: Events) -> None:
    attempts: list[int] = []
    supervisor = Supervisor.start([ChildSpec("f", lambda: FlakyStart.start(attempts))],
                                  max_restarts=3, name="f")
    ref = refs(supervisor)["f"]
    assert ref is not None
    ref.tell("crash")
    events.wait_for("child_restarted", child_id="f")
    assert len(attempts) == 4
    assert events.named("child_start_failed") == [("child_start_failed", "f")] * 2
    assert supervisor.stop()


def test_a_dynamic_supervisor_does_not_wait_for_on_start() -> None:
    """Its children are temporary and independent, and a call actor's ``on_start`` is the
    call: waiting would run a batch one call at a time."""

    class Blocks(SupervisedActor, pykka.ThreadingActor):
        def __init__(self, release: threading.Event, finished: threading.Event) -> None:
            super().__init__()
            self.release, self.finished = release, finished

        def on_start(self) -> None:
            self.release.wait(WAIT)
            self.finished.set()

    supervisor = DynamicSupervisor.start()
    release, finished = threading.Event(), threading.Event()
    ref = supervisor.start_child(lambda: Blocks.start(release, finished))
    assert not finished.is_set()  # start_child returned while on_start still runs
    release.set()
    assert finished.wait(WAIT)
    ref.stop()
    assert supervisor.stop()


def test_start_timeout_defaults_and_validation() -> None:
    assert ChildSpec("w", Worker.start).start_timeout == 5.0
    assert ChildSpec("s", Supervisor.start, type="supervisor").start_timeout == math.inf
    assert ChildSpec("w", Worker.start, start_timeout=math.inf).start_limit == math.inf
    for bad in (0, -1, math.nan, "5", True):
        with pytest.raises(ChildSpecError, match="child 'w': start_timeout must be a number "
                                                 "of seconds > 0"):
            ChildSpec("w", Worker.start, start_timeout=bad)  # type: ignore[arg-type]
