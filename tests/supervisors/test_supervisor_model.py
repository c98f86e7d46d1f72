"""The Supervisor against a small pure model of OTP's rules, driven by hypothesis.

Children crash, stop normally, are terminated and restarted through the API, and the clock
moves; after every step, which children run and how many restarts happened must match.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import pykka
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.support.events import Events
from tests.support.supervision import FakeClock, Worker, end_child, refs
from toolvisor._logging import EventSink, set_event_sink
from toolvisor.supervisors import ChildSpec, Supervisor, SupervisorRef

MAX_RESTARTS, MAX_SECONDS = 3, 5.0
IDS = ("a", "b", "c")


@dataclass
class OtpModel:
    """OTP's supervisor rules, as plain data and functions."""

    strategy: str
    restart: dict[str, str]
    children: list[str] = field(default_factory=lambda: list(IDS))  # specs, in start order
    running: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(IDS, True))
    restart_times: list[float] = field(default_factory=list)
    restarts: int = 0
    alive: bool = True

    def child_exited(self, child_id: str, abnormal: bool, now: float) -> None:
        self.running[child_id] = False
        kind = self.restart[child_id]
        if kind == "temporary":
            self.children.remove(child_id)
            return
        if kind == "transient" and not abnormal:
            return
        self.restart_times = [t for t in self.restart_times if t >= now - MAX_SECONDS] + [now]
        if len(self.restart_times) > MAX_RESTARTS:
            self.alive = False
            self.running = dict.fromkeys(self.running, False)
            return
        position = self.children.index(child_id)
        group = {
            "one_for_one": [child_id],
            "one_for_all": list(self.children),
            "rest_for_one": self.children[position:],
        }[self.strategy]
        for member in group:
            if member != child_id and self.restart[member] == "temporary":
                self.children.remove(member)
                continue
            self.running[member] = True
            self.restarts += 1

    def terminate(self, child_id: str) -> None:
        self.running[child_id] = False
        if self.restart[child_id] == "temporary":
            self.children.remove(child_id)

    def running_children(self) -> list[tuple[str, bool]]:
        return [(child_id, self.running[child_id]) for child_id in self.children]


class SupervisorMatchesOtp(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.events = Events()
        self.previous_sink: EventSink | None = set_event_sink(self.events.sink)
        self.clock = FakeClock()
        self.supervisor: SupervisorRef | None = None
        self.model: OtpModel | None = None

    @initialize(
        strategy=st.sampled_from(["one_for_one", "one_for_all", "rest_for_one"]),
        restart=st.lists(st.sampled_from(["permanent", "transient", "temporary"]),
                         min_size=3, max_size=3),
    )
    def start(self, strategy: Any, restart: list[Any]) -> None:
        kinds = dict(zip(IDS, restart, strict=True))
        self.model = OtpModel(strategy, kinds)
        self.supervisor = Supervisor.start(
            [ChildSpec(i, functools.partial(Worker.start, i), restart=kinds[i]) for i in IDS],
            strategy=strategy, max_restarts=MAX_RESTARTS, max_seconds=MAX_SECONDS,
            clock=self.clock, name="model",
        )

    def running(self, child_id: str) -> bool:
        assert self.model is not None
        return self.model.alive and child_id in self.model.children and (
            self.model.running[child_id]
        )

    @rule(child_id=st.sampled_from(IDS), abnormal=st.booleans())
    def child_ends(self, child_id: str, abnormal: bool) -> None:
        assert self.model is not None and self.supervisor is not None
        if not self.running(child_id):
            return
        end_child(self.supervisor, self.events, child_id, "crash" if abnormal else "stop")
        self.model.child_exited(child_id, abnormal, self.clock.now)
        if not self.model.alive:
            stopped = self.events.wait_for("supervisor_stopped", supervisor_id="model")
            assert stopped["reason"] == "shutdown"

    @precondition(lambda self: self.model is not None and self.model.alive)
    @rule(child_id=st.sampled_from(IDS))
    def terminate(self, child_id: str) -> None:
        assert self.model is not None and self.supervisor is not None
        if child_id in self.model.children:
            self.supervisor.terminate_child(child_id)
            self.model.terminate(child_id)

    @precondition(lambda self: self.model is not None and self.model.alive)
    @rule(child_id=st.sampled_from(IDS))
    def restart_stopped(self, child_id: str) -> None:
        assert self.model is not None and self.supervisor is not None
        if child_id in self.model.children and not self.model.running[child_id]:
            self.supervisor.restart_child(child_id)
            self.model.running[child_id] = True

    @rule(seconds=st.sampled_from([0.5, 2.0, 6.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @invariant()
    def same_children_and_restarts(self) -> None:
        if self.model is None or self.supervisor is None:
            return
        if self.model.alive:  # this ask comes after the handling of every exit so far
            actual = [(i, ref is not None) for i, ref in refs(self.supervisor).items()]
            assert actual == self.model.running_children()
        else:
            assert not self.supervisor.is_alive()
        assert len(self.events.named("child_restarted")) == self.model.restarts

    def teardown(self) -> None:
        try:
            if self.supervisor is not None:
                self.supervisor.stop()
            assert pykka.ActorRegistry.get_by_class(Worker) == []
        finally:
            set_event_sink(self.previous_sink)


SupervisorMatchesOtp.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_supervisor_matches_the_otp_model = SupervisorMatchesOtp.TestCase
