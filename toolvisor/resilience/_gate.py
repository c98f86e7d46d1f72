"""``ToolGate``: one tool's breaker, rate limit and bulkhead, and the calls waiting at them.

A call passes them in this order, each one a plain method call that returns what the host
must do (start it, refuse it, wake it later, log a breaker's move):

1. the breaker, without a permit: a call to an open tool is refused at once, never queued;
2. the rate limit: take a token, or wait for the next one (refused if it is due past
   ``max_wait``);
3. the bulkhead: take a slot, or wait in its queue (refused when the queue is full, or when
   the wait passes ``max_wait``);
4. the breaker again, now taking a permit: whatever happened while the call waited, no call
   starts while its breaker is open.

A call that started is :meth:`finish`-ed exactly once: its outcome goes to the breaker and its
slot to the first call waiting. Pure: no threads, the clock injected, one owner at a time.

An open breaker refuses with reason ``not_found`` (code ``circuit_open``): the reasons are a
closed set, and only that one is true (the tool is not available now, its handler did not
run); ``timeout`` would have every retryable tool retried into the open breaker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from toolvisor.contract import HandlerResult, ToolErrorReason
from toolvisor.resilience._breaker import (
    Breaker,
    CircuitBreaker,
    NotPermitted,
    Permit,
    Transition,
    Verdict,
)
from toolvisor.resilience._bulkhead import Bulkhead, BulkheadSlots
from toolvisor.resilience._checks import check_clock
from toolvisor.resilience._rate_limit import RateLimit, TokenBucket
from toolvisor.resilience._state import GateState

CIRCUIT_OPEN = "circuit_open"
RATE_LIMITED = "rate_limited"
BULKHEAD_FULL = "bulkhead_full"
BULKHEAD_WAIT_TIMEOUT = "bulkhead_wait_timeout"


@dataclass(frozen=True, slots=True)
class Resilience:
    """What guards one tool: any of a circuit breaker, a bulkhead and a rate limit."""

    breaker: Breaker | None = None
    bulkhead: Bulkhead | None = None
    rate_limit: RateLimit | None = None

    def __post_init__(self) -> None:
        for name, kind in (("breaker", Breaker), ("bulkhead", Bulkhead),
                           ("rate_limit", RateLimit)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"Resilience.{name} must be a {kind.__name__} or None, got "
                                f"{type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call may not run: the ``ToolError`` reason and code it gets, a message for the
    model, and ``retry_in`` (seconds until the tool is tried again, if known)."""

    reason: ToolErrorReason
    code: str
    message: str
    retry_in: float | None = None


@dataclass(frozen=True, slots=True)
class Start:
    """Start the call now."""

    ticket: int


@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer the call with ``refusal``; its handler does not run."""

    ticket: int
    refusal: Refusal


@dataclass(frozen=True, slots=True)
class WakeIn:
    """Call :meth:`ToolGate.wake` for the call in ``seconds`` (its token is due, or its wait
    in the queue has run out); ``None``: it waits for a slot with no deadline."""

    ticket: int
    seconds: float | None


@dataclass(frozen=True, slots=True)
class Moved:
    """The tool's breaker moved (the call ``ticket`` was being handled)."""

    ticket: int
    transition: Transition


Action: TypeAlias = Start | Refuse | WakeIn | Moved


@dataclass(frozen=True, slots=True)
class _Call:
    """Where a call is: waiting for a token or a slot, or running (with what it holds)."""

    stage: Literal["token", "queued", "running"]
    permit: Permit | None = None
    slot: bool = False


class ToolGate:
    """The gate of one tool (``name``), for every run of an agent. Not thread-safe."""

    def __init__(self, name: str, config: Resilience, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(config, Resilience):
            raise TypeError(f"config must be a Resilience, got {type(config).__name__}")
        clock = check_clock(clock)
        self.name = name
        self.config = config
        self.breaker = None if config.breaker is None else CircuitBreaker(config.breaker,
                                                                           clock=clock)
        self.bucket = None if config.rate_limit is None else TokenBucket(config.rate_limit,
                                                                         clock=clock)
        self.slots = None if config.bulkhead is None else BulkheadSlots(config.bulkhead)
        self._calls: dict[int, _Call] = {}

    def arrive(self, ticket: int) -> list[Action]:
        """A call of this tool wants to run."""
        if ticket in self._calls:
            raise ValueError(f"ticket {ticket} is already at the gate of {self.name!r}")
        actions: list[Action] = []
        refused = None if self.breaker is None else self.breaker.check()
        self._moves(ticket, actions)
        if refused is not None:
            return [*actions, Refuse(ticket, self._circuit_open(refused))]
        if self.bucket is not None:
            wait = self.bucket.take()
            if wait is None:
                return [*actions, Refuse(ticket, self._rate_limited())]
            if wait > 0:
                self._calls[ticket] = _Call("token")
                return [*actions, WakeIn(ticket, wait)]
        return actions + self._enter(ticket)

    def wake(self, ticket: int) -> list[Action]:
        """The wait :class:`WakeIn` asked for is over (a late or repeated wake does nothing)."""
        call = self._calls.get(ticket)
        if call is None or call.stage == "running":
            return []
        del self._calls[ticket]
        if call.stage == "token":
            assert self.bucket is not None
            self.bucket.waited()
            return self._enter(ticket)
        assert self.slots is not None
        self.slots.withdraw(ticket, refused=True)
        return [Refuse(ticket, Refusal(
            "timeout", BULKHEAD_WAIT_TIMEOUT,
            f"tool {self.name!r} is busy: the call waited {self.slots.config.max_wait:g} s "
            f"for one of its {self.slots.config.max_concurrent} slots and did not get one; "
            "it did not run"))]

    def finish(self, ticket: int, outcome: Verdict | HandlerResult) -> list[Action]:
        """A started call ended with ``outcome``; its slot goes to the first call waiting."""
        call = self._calls.get(ticket)
        if call is None or call.stage != "running":
            raise ValueError(f"ticket {ticket} is not running at the gate of {self.name!r}")
        del self._calls[ticket]
        actions: list[Action] = []
        if call.permit is not None:
            assert self.breaker is not None
            self.breaker.record(call.permit, outcome)
            self._moves(ticket, actions)
        if call.slot:
            self._free_slot(actions)
        return actions

    def drop(self, ticket: int) -> None:
        """A call still waiting is withdrawn (its run ended); a started call must finish."""
        call = self._calls.get(ticket)
        if call is None or call.stage == "running":
            return
        del self._calls[ticket]
        if call.stage == "token":
            assert self.bucket is not None
            self.bucket.give_back()
        else:
            assert self.slots is not None
            self.slots.withdraw(ticket)

    @property
    def hidden(self) -> bool:
        """Whether the model should not be offered the tool now (open, ``hide_while_open``)."""
        return self.breaker is not None and self.breaker.config.hide_while_open \
            and self.breaker.status == "open"

    def waiting(self) -> list[int]:
        """The tickets of the calls waiting at the gate, in arrival order."""
        return [t for t, call in self._calls.items() if call.stage != "running"]

    def running(self) -> list[int]:
        """The tickets of the calls started and not finished."""
        return [t for t, call in self._calls.items() if call.stage == "running"]

    def state(self) -> GateState:
        return GateState(
            breaker=None if self.breaker is None else self.breaker.snapshot(),
            bulkhead=None if self.slots is None else self.slots.snapshot(),
            rate_limit=None if self.bucket is None else self.bucket.snapshot())

    # --- internals --------------------------------------------------------------------------

    def _enter(self, ticket: int) -> list[Action]:
        """Past the rate limit: take a slot, queue, or be refused; then start."""
        if self.slots is None:
            return self._start(ticket, slot=False)
        verdict = self.slots.enter(ticket)
        if verdict == "full":
            config = self.slots.config
            return [Refuse(ticket, Refusal(
                "timeout", BULKHEAD_FULL,
                f"tool {self.name!r} is busy: {config.max_concurrent} calls are running and "
                f"{config.max_queue} waiting, the most it queues; the call did not run"))]
        if verdict == "queued":
            self._calls[ticket] = _Call("queued")
            return [WakeIn(ticket, self.slots.config.max_wait)]
        return self._start(ticket, slot=True)

    def _start(self, ticket: int, *, slot: bool) -> list[Action]:
        """The breaker's permit, then start; a refused call gives its slot back."""
        actions: list[Action] = []
        permit = None if self.breaker is None else self.breaker.acquire()
        self._moves(ticket, actions)
        if isinstance(permit, NotPermitted):
            actions.append(Refuse(ticket, self._circuit_open(permit)))
            if slot:
                self._free_slot(actions)
            return actions
        self._calls[ticket] = _Call("running", permit=permit, slot=slot)
        actions.append(Start(ticket))
        return actions

    def _free_slot(self, actions: list[Action]) -> None:
        """Give a slot back: the first call waiting takes it (and may be refused in turn)."""
        assert self.slots is not None
        ticket = self.slots.leave()
        if ticket is not None:
            assert isinstance(ticket, int)
            del self._calls[ticket]
            actions.extend(self._start(ticket, slot=True))

    def _moves(self, ticket: int, actions: list[Action]) -> None:
        if self.breaker is not None:
            actions.extend(Moved(ticket, t) for t in self.breaker.take_transitions())

    def _circuit_open(self, refused: NotPermitted) -> Refusal:
        if refused.retry_in is None:
            when = "its trial calls are running; try again once they are done"
        else:
            when = f"it will be tried again in {refused.retry_in:.1f} s"
        return Refusal("not_found", CIRCUIT_OPEN,
                       f"tool {self.name!r} is unavailable: its circuit is {refused.status} "
                       f"({refused.why}); {when}; the call did not run", refused.retry_in)

    def _rate_limited(self) -> Refusal:
        assert self.bucket is not None
        config = self.bucket.config
        retry_in = self.bucket.next_in()
        return Refusal("timeout", RATE_LIMITED,
                       f"tool {self.name!r} is rate limited ({config.calls} calls per "
                       f"{config.per:g} s): its next turn is in {retry_in:.1f} s, past the "
                       f"{config.max_wait:g} s a call may wait; the call did not run",
                       retry_in)
