"""Supervisor against OTP's rules: start/stop order, strategies x restart types, intensity,
escalation, shutdown and abandon, start failures, the child API, exit reasons."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka
import pytest

from tests.support.events import WAIT, Events
from tests.support.supervision import FakeClock, Worker, end_child, refs, spec
from toolvisor.supervisors import (
    ChildRestartingError,
    ChildRunningError,
    ChildSpec,
    ChildSpecError,
    ChildStartError,
    DuplicateChildError,
    SupervisedActor,
    Supervisor,
    SupervisorRef,
    UnknownChildError,
)
from toolvisor.supervisors._supervisor import _CountChildren

# --- order ---


def test_children_start_in_order_and_stop_in_reverse_order() -> None:
    journal: list[tuple[str, str]] = []
    supervisor = Supervisor.start([spec(n, journal) for n in "abc"])
    assert journal == [("start", "a"), ("start", "b"), ("start", "c")]
    assert [info.id for info in supervisor.which_children()] == ["a", "b", "c"]
    assert supervisor.stop() is True
    assert journal[3:] == [("stop", "c"), ("stop", "b"), ("stop", "a")]


# --- strategies x restart types (OTP's supervisor(3) semantics) ---


def expected_after_exit(
    strategy: str, restart: str, how: str, sibling: str
) -> tuple[set[str], set[str], set[str]]:
    """(ids replaced by a new incarnation, ids left untouched, ids forgotten) after child
    ``b`` of ``[a permanent, b restart, c sibling]`` exits by ``how``."""
    restarts = restart == "permanent" or (restart == "transient" and how == "crash")
    if not restarts:
        return set(), {"a", "c"}, {"b"} if restart == "temporary" else set()
    group = {"one_for_one": {"b"}, "one_for_all": {"a", "b", "c"}, "rest_for_one": {"b", "c"}}
    replaced = group[strategy]
    forgotten = {"c"} if sibling == "temporary" and "c" in replaced else set()
    return replaced - forgotten, {"a", "b", "c"} - replaced, forgotten


@pytest.mark.parametrize("sibling", ["permanent", "temporary"])
@pytest.mark.parametrize("how", ["crash", "stop"])
@pytest.mark.parametrize("restart", ["permanent", "transient", "temporary"])
@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
def test_strategy_and_restart_type_decide_what_is_restarted(
    events: Events, strategy: Any, restart: Any, how: str, sibling: Any
) -> None:
    supervisor = Supervisor.start(
        [spec("a"), spec("b", restart=restart), spec("c", restart=sibling)], strategy=strategy
    )
    before = refs(supervisor)
    end_child(supervisor, events, "b", how)
    after = refs(supervisor)
    replaced, untouched, forgotten = expected_after_exit(strategy, restart, how, sibling)
    assert set(after) == {"a", "b", "c"} - forgotten
    for child_id in replaced:
        assert after[child_id] is not None and after[child_id] != before[child_id]
        assert after[child_id].is_alive()  # type: ignore[union-attr]
    for child_id in untouched - {"b"}:
        assert after[child_id] == before[child_id]
    if "b" in untouched and "b" in after:
        assert after["b"] is None  # a transient child that exited normally stays stopped
    assert supervisor.stop()


def test_a_transient_child_stopped_by_shutdown_is_not_restarted(events: Events) -> None:
    inner = Supervisor.start([spec("w")], max_restarts=0, name="inner")
    outer_spec = ChildSpec("inner", lambda: Supervisor.start([spec("w")], max_restarts=0),
                           restart="transient", type="supervisor")
    inner.stop()
    outer = Supervisor.start([outer_spec], name="outer")
    child = refs(outer)["inner"]
    assert isinstance(child, SupervisorRef)
    end_child(child, events, "w", "crash")  # inner exceeds intensity: exits with `shutdown`
    events.wait_for("child_exited", supervisor_id="outer", reason="shutdown")
    assert refs(outer) == {"inner": None}
    assert outer.stop()


# --- intensity ---


def test_more_than_max_restarts_within_max_seconds_shuts_the_supervisor_down(
    events: Events,
) -> None:
    clock = FakeClock()
    journal: list[tuple[str, str]] = []
    supervisor = Supervisor.start(
        [spec("a", journal), spec("b", journal), spec("c", journal)],
        max_restarts=2, max_seconds=5, clock=clock, name="s",
    )
    end_child(supervisor, events, "b", "crash")
    clock.now = 4.0
    end_child(supervisor, events, "b", "crash")
    assert supervisor.count_children()["active"] == 3
    del journal[:]
    clock.now = 5.0  # the restart at 0 is still within 5 seconds: a third one is too many
    end_child(supervisor, events, "b", "crash")
    stopped = events.wait_for("supervisor_stopped", supervisor_id="s")
    assert stopped["reason"] == "shutdown"
    assert ("restart_intensity_exceeded", "b") in events.named()
    assert journal == [("stop", "c"), ("stop", "a")]
    assert not supervisor.is_alive()


def test_restarts_older_than_max_seconds_do_not_count(events: Events) -> None:
    clock = FakeClock()
    supervisor = Supervisor.start([spec("a")], max_restarts=1, max_seconds=5, clock=clock)
    for step in range(4):
        clock.now = step * 5.5
        end_child(supervisor, events, "a", "crash")
    assert supervisor.count_children()["active"] == 1
    assert events.named("child_restarted") == [("child_restarted", "a")] * 4
    assert supervisor.stop()


def test_max_restarts_zero_gives_up_at_the_first_exit_that_needs_a_restart(
    events: Events,
) -> None:
    supervisor = Supervisor.start([spec("a", restart="transient")], max_restarts=0, name="z")
    end_child(supervisor, events, "a", "stop")  # normal exit of a transient: no restart needed
    assert refs(supervisor) == {"a": None}
    supervisor.restart_child("a")
    end_child(supervisor, events, "a", "crash")
    assert events.wait_for("supervisor_stopped", supervisor_id="z")["reason"] == "shutdown"


def test_on_event_is_told_each_restart_and_the_give_up_before_they_are_logged(
    events: Events,
) -> None:
    told: list[tuple[str, dict[str, Any]]] = []

    def on_event(event: str, fields: dict[str, Any]) -> None:
        logged = any(e["event"] == event and e.get("child_id") == fields["child_id"]
                     for e in list(events.items))
        told.append((event, {**fields, "already_logged": logged}))
        if len(told) == 1:
            raise RuntimeError("a broken hook")  # logged and ignored: the restarts go on

    supervisor = Supervisor.start([spec("a"), spec("b")], strategy="one_for_all",
                                  max_restarts=1, name="h", on_event=on_event)
    end_child(supervisor, events, "b", "crash")
    events.wait_for("child_restarted", child_id="b")
    assert events.wait_for("event_callback_failed")["error"] == "RuntimeError: a broken hook"
    end_child(supervisor, events, "b", "crash")
    events.wait_for("supervisor_stopped", supervisor_id="h")
    assert [(event, fields["child_id"], fields["reason"], fields.get("restarts"))
            for event, fields in told] == [
        ("child_restarted", "a", "sibling 'b': ValueError('b crashed')", 1),
        ("child_restarted", "b", "ValueError('b crashed')", 1),
        ("restart_intensity_exceeded", "b", "ValueError('b crashed')", None),
    ]
    assert all(f["supervisor_id"] == "h" and not f["already_logged"] for _, f in told)
    assert told[2][1]["max_restarts"] == 1


# --- escalation ---


def test_a_child_supervisor_past_its_intensity_is_restarted_and_the_parent_gives_up_later(
    events: Events,
) -> None:
    clock = FakeClock()

    def middle() -> SupervisorRef:
        return Supervisor.start([spec("w")], max_restarts=0, clock=clock, name="middle")

    root = Supervisor.start(
        [spec("first"), ChildSpec("middle", middle, type="supervisor"), spec("last")],
        strategy="rest_for_one", max_restarts=1, clock=clock, name="root",
    )
    assert root.count_children() == {
        "specs": 3, "active": 3, "supervisors": 1, "workers": 2, "abandoned": 0
    }
    first, old_middle, old_last = (refs(root)[k] for k in ("first", "middle", "last"))
    assert isinstance(old_middle, SupervisorRef)
    end_child(old_middle, events, "w", "crash")
    events.wait_for("child_exited", supervisor_id="root", child_id="middle", reason="shutdown")
    new_middle, new_last = refs(root)["middle"], refs(root)["last"]
    assert isinstance(new_middle, SupervisorRef)
    assert new_middle != old_middle and new_last != old_last and refs(root)["first"] == first
    assert refs(new_middle)["w"] is not None

    end_child(new_middle, events, "w", "crash")  # the root's second restart in the period
    assert events.wait_for("supervisor_stopped", supervisor_id="root")["reason"] == "shutdown"
    assert not first.is_alive()  # type: ignore[union-attr]


# --- shutdown ---


def test_a_child_that_ignores_stop_is_abandoned_after_its_grace(events: Events) -> None:
    supervisor = Supervisor.start(
        [spec("slow", shutdown=0.05), spec("fine")], name="g"
    )
    slow = refs(supervisor)["slow"]
    assert slow is not None
    entered, release = threading.Event(), threading.Event()
    slow.tell(("block", entered, release))
    actor = slow._actor_weakref()
    assert entered.wait(WAIT)
    try:
        supervisor.terminate_child("slow")
        assert supervisor.count_children()["abandoned"] == 1
        assert actor is not None and actor.abandoned.is_set()
        assert ("child_abandoned", "slow") in events.named()
        assert refs(supervisor) == {"slow": None, "fine": refs(supervisor)["fine"]}
        assert supervisor.stop()
        assert events.wait_for("supervisor_stopped", supervisor_id="g")["abandoned"] == 1
    finally:
        release.set()


def test_brutal_kill_does_not_wait(events: Events) -> None:
    supervisor = Supervisor.start([spec("busy", shutdown="brutal_kill")], name="b")
    busy = refs(supervisor)["busy"]
    assert busy is not None
    entered, release = threading.Event(), threading.Event()
    busy.tell(("block", entered, release))
    assert entered.wait(WAIT)
    try:
        assert supervisor.stop()
        assert ("child_abandoned", "busy") in events.named()
    finally:
        release.set()


# --- start failures ---


def failing_start() -> pykka.ActorRef[Any]:
    raise OSError("no such device")


def test_a_child_that_fails_to_start_at_init_fails_the_supervisor_naming_it() -> None:
    journal: list[tuple[str, str]] = []
    with pytest.raises(ChildStartError, match="child 'b' failed to start") as caught:
        Supervisor.start([spec("a", journal), ChildSpec("b", failing_start), spec("c", journal)])
    assert caught.value.child_id == "b"
    assert isinstance(caught.value.__cause__, OSError)
    assert journal == [("start", "a"), ("stop", "a")]


class Unsupervisable(pykka.ThreadingActor):
    pass


def test_a_start_function_must_return_a_supervised_actor_ref() -> None:
    started: list[pykka.ActorRef[Any]] = []

    def plain() -> pykka.ActorRef[Any]:
        started.append(Unsupervisable.start())
        return started[-1]

    with pytest.raises(ChildStartError, match="SupervisedActor") as caught:
        Supervisor.start([ChildSpec("plain", plain)])
    assert isinstance(caught.value.__cause__, TypeError)
    assert started[0].actor_stopped.wait(WAIT)  # the supervisor stopped what it cannot watch


def test_a_failing_restart_counts_and_is_tried_again(events: Events) -> None:
    attempts: list[int] = []

    def flaky() -> pykka.ActorRef[Any]:
        attempts.append(1)
        if len(attempts) in (2, 3):
            raise OSError("not yet")
        return Worker.start("flaky")

    supervisor = Supervisor.start([ChildSpec("flaky", flaky)], max_restarts=3, name="f")
    end_child(supervisor, events, "flaky", "crash")
    events.wait_for("child_restarted", child_id="flaky")
    assert len(attempts) == 4
    assert events.named("child_start_failed") == [("child_start_failed", "flaky")] * 2
    assert supervisor.stop()


def test_a_restart_that_keeps_failing_exceeds_the_intensity(events: Events) -> None:
    attempts: list[int] = []

    def once() -> pykka.ActorRef[Any]:
        attempts.append(1)
        if len(attempts) > 1:
            raise OSError("gone")
        return Worker.start("once")

    supervisor = Supervisor.start([ChildSpec("once", once)], max_restarts=2, name="k")
    end_child(supervisor, events, "once", "crash")
    assert events.wait_for("supervisor_stopped", supervisor_id="k")["reason"] == "shutdown"
    assert len(attempts) == 3  # the first start, then two failed restarts; the third is over
    assert not supervisor.is_alive()


class RestartsFailing:
    """A start function whose restarts fail while ``failing`` is set: the supervisor keeps
    trying again through its mailbox, so calls made meanwhile see the child ``restarting``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failing = threading.Event()
        self.attempts = 0

    def __call__(self) -> pykka.ActorRef[Any]:
        self.attempts += 1
        if self.failing.is_set():
            raise OSError("not yet")
        return Worker.start(self.name)


def restarting_child(events: Events) -> tuple[SupervisorRef, RestartsFailing]:
    start = RestartsFailing("r")
    supervisor = Supervisor.start([ChildSpec("r", start)], max_restarts=10**9, name="rs")
    start.failing.set()
    end_child(supervisor, events, "r", "crash")
    events.wait_for("child_start_failed", child_id="r")
    return supervisor, start


def test_a_child_whose_restart_failed_is_restarting_until_a_restart_works(
        events: Events) -> None:
    """OTP: ``which_children`` shows ``restarting``, which is not ``active``; ``restart_child``
    and ``delete_child`` answer ``{error, restarting}``."""
    supervisor, start = restarting_child(events)
    [info] = supervisor.which_children()
    assert (info.ref, info.state) == (None, "restarting")
    assert supervisor.count_children()["active"] == 0
    with pytest.raises(ChildRestartingError, match="'r' is restarting"):
        supervisor.restart_child("r")
    with pytest.raises(ChildRestartingError, match="terminate_child it first"):
        supervisor.delete_child("r")
    with pytest.raises(DuplicateChildError, match="present and restarting"):
        supervisor.start_child(spec("r"))
    start.failing.clear()
    events.wait_for("child_restarted", child_id="r")
    [info] = supervisor.which_children()
    assert info.state == "running" and info.ref is not None and info.ref.is_alive()
    assert supervisor.stop()


def test_terminating_a_restarting_child_stops_its_retries(events: Events) -> None:
    """OTP's ``try_again_restart`` restarts only a child still marked restarting: once
    terminated, the child stays stopped and can be deleted."""
    supervisor, start = restarting_child(events)
    supervisor.terminate_child("r")
    start.failing.clear()
    attempts = start.attempts
    # Any try-again queued before the terminate is served before this call: it must not start.
    [info] = supervisor.which_children()
    assert (info.ref, info.state) == (None, "stopped")
    assert start.attempts == attempts
    assert events.named("child_restarted") == []
    supervisor.delete_child("r")
    assert supervisor.which_children() == []
    assert supervisor.stop()


def test_count_children_does_not_count_a_dead_child_whose_exit_is_still_queued(
        events: Events) -> None:
    """OTP counts ``active`` with ``is_process_alive``: a child that died, whose exit notice
    waits behind the call, is not active."""
    entered, release = threading.Event(), threading.Event()

    def slow() -> pykka.ActorRef[Any]:
        entered.set()
        release.wait(WAIT)
        return Worker.start("slow")

    supervisor = Supervisor.start([spec("a")], name="cc")
    victim = refs(supervisor)["a"]
    assert victim is not None
    adder = threading.Thread(target=supervisor.start_child, args=(ChildSpec("slow", slow),))
    adder.start()
    assert entered.wait(WAIT)  # the supervisor's thread is busy starting "slow"
    counted = supervisor.ask(_CountChildren(), block=False)  # queued behind the start...
    victim.tell("crash")  # ...and before the victim's exit notice
    assert victim.actor_stopped.wait(WAIT)
    release.set()
    assert counted.get(timeout=WAIT)["active"] == 1  # "slow" only: "a" is dead
    adder.join(WAIT)
    events.wait_for("child_restarted", child_id="a")
    assert supervisor.count_children()["active"] == 2
    assert supervisor.stop()


# --- the child API ---


def test_start_terminate_restart_delete_child() -> None:
    journal: list[tuple[str, str]] = []
    supervisor = Supervisor.start([spec("a", journal)])
    new = supervisor.start_child(spec("b", journal, restart="transient"))
    assert refs(supervisor) == {"a": refs(supervisor)["a"], "b": new}
    with pytest.raises(DuplicateChildError, match="already running"):
        supervisor.start_child(spec("b"))
    with pytest.raises(ChildRunningError):
        supervisor.delete_child("b")
    supervisor.terminate_child("b")
    assert refs(supervisor)["b"] is None and not new.is_alive()
    with pytest.raises(DuplicateChildError, match="present but stopped"):
        supervisor.start_child(spec("b"))
    again = supervisor.restart_child("b")
    assert again.is_alive()
    with pytest.raises(ChildRunningError):
        supervisor.restart_child("b")
    supervisor.terminate_child("b")
    supervisor.delete_child("b")
    with pytest.raises(UnknownChildError, match="known ids: \\['a'\\]"):
        supervisor.terminate_child("b")
    supervisor.start_child(spec("t", restart="temporary"))
    supervisor.terminate_child("t")  # a terminated temporary child is forgotten
    assert [info.id for info in supervisor.which_children()] == ["a"]
    with pytest.raises(ChildStartError, match="'x'"):
        supervisor.start_child(ChildSpec("x", failing_start))
    assert supervisor.count_children()["specs"] == 1
    assert supervisor.stop()
    assert journal.count(("start", "b")) == 2 and journal.count(("stop", "b")) == 2
    with pytest.raises(pykka.ActorDeadError):
        supervisor.which_children()


# --- exit reasons reported by SupervisedActor ---


class FailsToStop(SupervisedActor, pykka.ThreadingActor):
    def on_stop(self) -> None:
        raise RuntimeError("bad stop")


@pytest.mark.parametrize(
    ("start", "action", "reason"),
    [
        (lambda: Worker.start("w"), "stop", "normal"),
        (lambda: Worker.start("w"), "crash", "ValueError('w crashed')"),
        (lambda: Worker.start("w"), "exit", "SystemExit(7)"),
        (FailsToStop.start, "stop_ref", "RuntimeError('bad stop')"),
    ],
)
def test_a_supervised_actor_reports_how_it_ended(
    events: Events, start: Callable[[], Any], action: str, reason: str
) -> None:
    bystander = Worker.start("bystander")
    supervisor = Supervisor.start([ChildSpec("x", start, restart="temporary")], name="r")
    ref = refs(supervisor)["x"]
    assert ref is not None
    if action == "stop_ref":
        ref.stop()
    else:
        ref.tell(action)
    assert events.wait_for("child_exited", supervisor_id="r")["reason"] == reason
    assert bystander.is_alive()  # a SystemExit in one actor does not stop every actor
    assert supervisor.stop() and bystander.stop()


def test_children_stopped_by_their_supervisor_exit_with_shutdown(events: Events) -> None:
    supervisor = Supervisor.start([spec("a")], name="d")
    supervisor.terminate_child("a")
    assert events.wait_for("child_exited", child_id="a")["reason"] == "shutdown"
    assert supervisor.stop()


# --- validation ---


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": ["unhashable"]}, "hashable"),
        ({"start": "not callable"}, "start must be a callable"),
        ({"restart": "sometimes"}, "restart must be one of"),
        ({"type": "manager"}, "type must be one of"),
        ({"shutdown": -1}, "grace in seconds"),
        ({"shutdown": "kill"}, "grace in seconds"),
    ],
)
def test_invalid_child_specs_are_refused(fields: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"id": "w", "start": Worker.start, **fields}
    with pytest.raises(ChildSpecError, match=message):
        ChildSpec(**arguments)


def test_shutdown_defaults_to_five_seconds_for_workers_and_infinity_for_supervisors() -> None:
    assert ChildSpec("w", Worker.start).shutdown == 5.0
    assert ChildSpec("s", Supervisor.start, type="supervisor").shutdown == float("inf")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"strategy": "all_for_one"}, "strategy must be one of"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"max_seconds": 0}, "max_seconds"),
        ({"children": [spec("a"), spec("a")]}, "two children have the id 'a'"),
        ({"children": ["a"]}, "must be ChildSpec"),
    ],
)
def test_invalid_supervisor_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ChildSpecError, match=message):
        Supervisor.start(**settings)
