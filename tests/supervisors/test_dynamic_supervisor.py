"""DynamicSupervisor: temporary children started in the caller's thread, a hard bound,
shutdown of the live children, and a place in a supervision tree."""

from __future__ import annotations

import threading
from typing import Any

import pykka
import pytest

from tests.support.events import WAIT, Events
from tests.support.supervision import Worker, refs
from toolvisor.supervisors import (
    ChildSpec,
    ChildSpecError,
    ChildStartError,
    DynamicSupervisor,
    DynamicSupervisorRef,
    SupervisedActor,
    Supervisor,
    SupervisorRef,
    TooManyChildrenError,
)


class DiesAtOnce(SupervisedActor, pykka.ThreadingActor):
    def on_start(self) -> None:
        raise RuntimeError("dead on arrival")


def test_children_are_temporary_and_counted_until_they_exit(events: Events) -> None:
    supervisor = DynamicSupervisor.start(max_children=3, name="calls")
    children = [supervisor.start_child(lambda: Worker.start("call")) for _ in range(3)]
    assert supervisor.count_children() == {
        "specs": 3, "active": 3, "supervisors": 0, "workers": 3, "abandoned": 0
    }
    assert {info.ref for info in supervisor.which_children()} == set(children)
    children[0].tell("crash")
    events.wait_for("child_exited", child_urn=children[0].actor_urn)
    assert supervisor.count_children()["active"] == 2
    assert children[1].ask("ping") == "ping"
    assert supervisor.stop()
    assert not any(child.is_alive() for child in children)
    assert events.wait_for("supervisor_stopped", supervisor_id="calls")["reason"] == "normal"


def test_past_max_children_a_start_is_refused_at_once(events: Events) -> None:
    supervisor = DynamicSupervisor.start(max_children=2)
    first = supervisor.start_child(lambda: Worker.start("one"))
    supervisor.start_child(lambda: Worker.start("two"))
    starts: list[str] = []

    def never_called() -> pykka.ActorRef[Any]:
        starts.append("called")
        return Worker.start("three")

    with pytest.raises(TooManyChildrenError, match="max_children=2"):
        supervisor.start_child(never_called)
    assert starts == []
    first.stop()
    events.wait_for("child_exited", child_urn=first.actor_urn)
    supervisor.start_child(lambda: Worker.start("three"))
    assert supervisor.count_children()["active"] == 2
    assert supervisor.stop()


def test_a_child_that_dies_while_starting_is_not_counted(events: Events) -> None:
    supervisor = DynamicSupervisor.start(max_children=1)
    ref = supervisor.start_child(DiesAtOnce.start)
    assert events.wait_for("child_exited", child_urn=ref.actor_urn)["reason"] == (
        "RuntimeError('dead on arrival')"
    )
    assert supervisor.count_children()["active"] == 0
    assert supervisor.stop()


def test_a_failing_start_releases_its_slot() -> None:
    supervisor = DynamicSupervisor.start(max_children=1)

    def broken() -> pykka.ActorRef[Any]:
        raise OSError("no handler")

    with pytest.raises(ChildStartError, match="a dynamic child failed to start"):
        supervisor.start_child(broken)
    assert supervisor.count_children()["active"] == 0
    supervisor.start_child(lambda: Worker.start("ok"))
    assert supervisor.stop()


def test_after_stop_no_child_starts() -> None:
    supervisor = DynamicSupervisor.start()
    assert supervisor.stop()
    with pytest.raises(pykka.ActorDeadError):
        supervisor.start_child(lambda: Worker.start("late"))


def test_children_that_ignore_stop_are_abandoned_after_the_grace(events: Events) -> None:
    supervisor = DynamicSupervisor.start(shutdown=0.05, name="hung")
    stuck = supervisor.start_child(lambda: Worker.start("stuck"))
    quick = supervisor.start_child(lambda: Worker.start("quick"))
    entered, release = threading.Event(), threading.Event()
    stuck.tell(("block", entered, release))
    assert entered.wait(WAIT)
    try:
        assert supervisor.stop()
        stopped = events.wait_for("supervisor_stopped", supervisor_id="hung")
        assert stopped["abandoned"] == 1
        assert events.wait_for("child_abandoned")["child_urn"] == stuck.actor_urn
        assert not quick.is_alive()
        assert supervisor.count_children()["abandoned"] == 1
    finally:
        release.set()


def test_it_runs_under_a_supervisor_and_is_replaced_when_it_crashes(events: Events) -> None:
    tree = Supervisor.start(
        [ChildSpec("calls", lambda: DynamicSupervisor.start(max_children=4),
                   type="supervisor")],
        name="tree",
    )
    calls = refs(tree)["calls"]
    assert isinstance(calls, DynamicSupervisorRef)
    child = calls.start_child(lambda: Worker.start("call"))
    calls.tell("unexpected message")  # logged and ignored by pykka: no crash
    calls.stop()
    events.wait_for("child_exited", supervisor_id="tree", child_id="calls")
    assert not child.is_alive()
    replacement = refs(tree)["calls"]
    assert isinstance(replacement, DynamicSupervisorRef) and replacement != calls
    assert tree.stop()


def test_nested_supervisor_ref_type_is_kept() -> None:
    tree = Supervisor.start([ChildSpec("s", Supervisor.start, type="supervisor")])
    assert isinstance(refs(tree)["s"], SupervisorRef)
    assert tree.stop()


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"max_children": 0}, "max_children"), ({"shutdown": -0.5}, "grace in seconds")],
)
def test_invalid_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ChildSpecError, match=message):
        DynamicSupervisor.start(**settings)
