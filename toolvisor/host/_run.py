"""``HostedRun``: what the orchestrator keeps for one run it hosts.

Every field belongs to the orchestrator's thread. The one exception is a cancel token (an
``Event``), which the call actor's thread also sets when its call ends.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pykka import ActorDeadError, ActorRef

from toolvisor.contract import ToolCall
from toolvisor.executor import CallHandle, Deadline
from toolvisor.host._key_waiter import KeyWaiter
from toolvisor.machine import CallToRun, PendingCall, TurnMachine


@dataclass(frozen=True, slots=True)
class ParkedCall:
    """A ``Pending`` call of the current suspension and the completion key it waits on."""

    call: ToolCall
    pending: PendingCall
    key: str


@dataclass(frozen=True, slots=True)
class BackingOff:
    """A retry waiting out its backoff; its deadline tells the orchestrator to start it."""

    planned: CallToRun
    reemitted: bool  # listed by the effect a restored run re-emitted (at most once applies)
    deadline: Deadline


@dataclass(eq=False)
class HostedRun:
    """A run's machine and everything the host started for it."""

    run_id: str
    machine: TurnMachine
    watchers: list[Future[Any]]  # answered with the run's next outcome
    timers: dict[int, Deadline] = field(default_factory=dict)  # by Sleep effect id
    handed: dict[str, int] = field(default_factory=dict)  # call id -> the attempt the host
    # was handed, until its reply is taken: a superseding ToolCalls effect lists it again
    # (at most one attempt of a call id is in flight: a retry follows its failure's reply)
    backing_off: dict[str, BackingOff] = field(default_factory=dict)  # by call id
    tokens: dict[str, threading.Event] = field(default_factory=dict)  # by call id: the
    # durable cancel token of each running call
    calls: dict[str, ActorRef[Any]] = field(default_factory=dict)  # by call id: the actor of
    # each running call, stopped (the call cancelled) on release
    waiting: dict[int, Callable[[], None]] = field(default_factory=dict)  # by gate ticket:
    # withdraws a call waiting at its tool's gate (a token, a bulkhead slot) on release
    waiters: dict[str, KeyWaiter] = field(default_factory=dict)  # by key
    suspended: bool = False  # the machine's last effect was Done(Suspended)
    failing: str | None = None  # fail_turn: the next waiting effect fails with this
    parked: tuple[int, dict[str, ParkedCall]] | None = None  # (Done effect id, its pending
    # calls by key): the keys of one suspension never change, so they are issued once
    model_call: tuple[int, CallHandle] | None = None  # (LlmCall effect id, its call)
    reemitted: int | None = None  # the waiting effect a restored run re-emits: the calls of
    # a ToolCalls may have run before the crash (only retryable or journaled ones run again),
    # and a Sleep or a backoff waits only what is left of it
    span: Any = None  # the run's trace span, when the agent traces
    model_span: Any = None  # the span of the model call in flight, when the agent traces
    model_started: tuple[int, int, float] | None = None  # (turn, attempt, monotonic start) of
    # the model call in flight

    def reply(self, outcome: Any) -> None:
        """Give ``outcome`` to everyone waiting for the run's next outcome."""
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(outcome)

    def lose(self, error: Exception) -> None:
        """The host gives the run up: release it and fail everyone waiting with ``error``."""
        self.release()
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_exception(error)

    def stop_waiters(self) -> None:
        """Stop and join the run's key waiters."""
        for waiter in self.waiters.values():
            waiter.stop()
        for waiter in self.waiters.values():
            waiter.join()
        self.waiters.clear()

    def release(self) -> None:
        """Stop the run's model call, timers, backoffs and key waiters; withdraw its calls
        waiting at their tools' gates; cancel its running calls (their ``ctx.cancelled`` is
        set at once) and release their durable waits."""
        if self.model_call is not None:
            self.model_call[1].cancel()
            self.model_call = None
        for withdraw in list(self.waiting.values()):
            withdraw()
        self.waiting.clear()
        for actor in self.calls.values():
            with contextlib.suppress(ActorDeadError):
                actor.stop(block=False)
        self.calls.clear()
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
        for retry in self.backing_off.values():
            retry.deadline.cancel()
        self.backing_off.clear()
        self.handed.clear()
        self.stop_waiters()
        for token in self.tokens.values():
            token.set()
        self.tokens.clear()
