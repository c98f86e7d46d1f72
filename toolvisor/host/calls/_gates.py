"""The agent's tool gates (breakers, bulkheads, rate limits) and the calls waiting at them.

``ToolGates`` holds one ``ToolGate`` per guarded tool, shared by every run of the agent (and
by the next orchestrator, should the supervisor restart it). Its lock guards the gates: the
orchestrator's thread passes calls through them, any thread may read :meth:`ToolGates.state`
and :meth:`ToolGates.hidden`. An unguarded tool costs one dict lookup and no lock.

``GatedCalls`` is the orchestrator's side and belongs to its thread: the calls waiting at a
gate (by run too, so :meth:`GatedCalls.stop_work` withdraws a run's as it ends), the calls
started through one (finished exactly once, when their reply is taken), and one deadline timer
thread whose callbacks only *tell* the orchestrator that a wait is over. It performs what the
gates answer: start a call, refuse it with a ``ToolError`` through the reply every call has,
set a wake-up, log a breaker's move and tell the run's ``on_progress``.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from pykka import ActorRef

from toolvisor._logging import EventLog, get_event_log
from toolvisor.actors import CallReply
from toolvisor.call import encode_checked
from toolvisor.contract import CallContext, Err, HandlerResult, Tool, ToolCall, ToolError
from toolvisor.executor import Deadline, DeadlineTimer
from toolvisor.host._mail import tell
from toolvisor.host._protocol import GateWoke
from toolvisor.resilience import (
    Action,
    Moved,
    Refusal,
    Refuse,
    Resilience,
    ResilienceState,
    Start,
    ToolGate,
    Transition,
    Verdict,
    WakeIn,
)

ResilienceConfig: TypeAlias = Resilience | Mapping[str, Resilience] | None
"""One ``Resilience`` for every tool, one per tool name, or none."""

MOVE_EVENTS = {"open": "circuit_opened", "half_open": "circuit_half_opened",
               "closed": "circuit_closed"}
"""The log and progress event of a breaker's move, by the status it moved to."""


class ToolGates:
    """Every guarded tool's gate, by tool name. Thread-safe (one lock)."""

    def __init__(self, config: ResilienceConfig = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if config is not None and not isinstance(config, Resilience | Mapping):
            raise TypeError(f"resilience must be a Resilience, a mapping from tool name to "
                            f"Resilience, or None; got {type(config).__name__}")
        self._default = config if isinstance(config, Resilience) else None
        mapping = config if isinstance(config, Mapping) else {}
        for name, each in mapping.items():
            if not isinstance(name, str) or not isinstance(each, Resilience):
                raise TypeError(f"resilience maps tool names to Resilience, got {name!r}: "
                                f"{type(each).__name__}")
        if not callable(clock):
            raise TypeError(f"resilience_clock must be a function returning seconds, got "
                            f"{clock!r}")
        self._clock = clock
        self._lock = threading.Lock()
        self._gates = {name: ToolGate(name, each, clock=clock) for name, each in mapping.items()}
        self._tickets = itertools.count(1)
        self._active = bool(self._gates) or self._default is not None

    def ticket(self, tool_name: str) -> int | None:
        """A ticket for a call of ``tool_name`` through its gate; ``None``: it has none."""
        if self._default is None and tool_name not in self._gates:
            return None  # without a default the gates never change: no lock needed
        with self._lock:
            self._gate(tool_name)
            return next(self._tickets)

    def arrive(self, tool_name: str, ticket: int) -> list[Action]:
        with self._lock:
            return self._must(tool_name).arrive(ticket)

    def wake(self, tool_name: str, ticket: int) -> list[Action]:
        with self._lock:
            return self._must(tool_name).wake(ticket)

    def finish(self, tool_name: str, ticket: int,
               outcome: Verdict | HandlerResult) -> list[Action]:
        with self._lock:
            return self._must(tool_name).finish(ticket, outcome)

    def drop(self, tool_name: str, ticket: int) -> None:
        with self._lock:
            self._must(tool_name).drop(ticket)

    def hidden(self) -> frozenset[str]:
        """The tools the model is not offered now: open breakers with ``hide_while_open``."""
        if not self._active:
            return frozenset()
        with self._lock:
            return frozenset(name for name, gate in self._gates.items() if gate.hidden)

    def state(self) -> ResilienceState:
        """Every gate as it stands (a tool under an agent-wide ``Resilience`` once called)."""
        with self._lock:
            return ResilienceState(tools={name: gate.state()
                                          for name, gate in sorted(self._gates.items())})

    def _gate(self, tool_name: str) -> ToolGate | None:
        gate = self._gates.get(tool_name)
        if gate is None and self._default is not None:
            gate = self._gates[tool_name] = ToolGate(tool_name, self._default,
                                                     clock=self._clock)
        return gate

    def _must(self, tool_name: str) -> ToolGate:
        gate = self._gate(tool_name)
        assert gate is not None, tool_name
        return gate


@dataclass(frozen=True, slots=True)
class GatedCall:
    """A call passing its tool's gate, with what starting or refusing it takes."""

    run_id: str
    tool: Tool
    call: ToolCall
    ctx: CallContext
    reply: Callable[[CallReply], None]
    ticket: int


def answer(reply: Callable[[CallReply], None], call: ToolCall, tool_name: str,
           result: HandlerResult) -> None:
    """Reply to a call that does not run, as its actor would have."""
    reply(CallReply(call.id, tool_name, result, encode_checked(result)[1]))


def refused(log: EventLog, run_id: str, call: ToolCall, tool_name: str,
            refusal: Refusal) -> Err:
    """The result of a call its tool's gate refused (logged ``call_refused``)."""
    log.info("call_refused", run_id=run_id, tool_name=tool_name, tool_call_id=call.id,
             code=refusal.code, retry_in=refusal.retry_in)
    metadata = {} if refusal.retry_in is None else {"retry_in": round(refusal.retry_in, 3)}
    return Err(ToolError(
        refusal.reason, f"tool error ({tool_name}): {refusal.reason}: {refusal.message}",
        tool_name=tool_name, tool_call_id=call.id, code=refusal.code, metadata=metadata))


def say_move(log: EventLog, run_id: str, tool_name: str, move: Transition,
             on_progress: Callable[[str, str, dict[str, Any]], None]) -> None:
    """Log a breaker's move (a warning when it opens) and tell it to ``on_progress``."""
    event = MOVE_EVENTS[move.after]
    fields = {"tool_name": tool_name, "before": move.before, "why": move.why}
    if move.after == "open":
        log.warning(event, run_id=run_id, **fields)
    else:
        log.info(event, run_id=run_id, **fields)
    on_progress(run_id, event, fields)


class GatedCalls:
    """The calls of one orchestrator's runs at their tools' gates. Its thread's alone."""

    def __init__(self, gates: ToolGates, launch: Callable[[GatedCall], None], me: ActorRef[Any],
                 on_progress: Callable[[str, str, dict[str, Any]], None]) -> None:
        self._gates = gates
        self._launch = launch
        self._me = me
        self._on_progress = on_progress
        self._waiting: dict[int, tuple[GatedCall, Deadline | None]] = {}
        self._running: dict[int, GatedCall] = {}
        self._by_run: dict[str, set[int]] = {}  # the tickets of each run's waiting calls
        self._timer: DeadlineTimer | None = None  # started on the first wait
        self._log = get_event_log("gates")

    def admit(self, call: GatedCall) -> None:
        """Pass a new call through its gate."""
        self._perform(call.tool.name, self._gates.arrive(call.tool.name, call.ticket),
                      {call.ticket: call})

    def woke(self, ticket: int) -> None:
        """A wait set by ``WakeIn`` is over; a call no longer waiting ignores it."""
        waiting = self._waiting.get(ticket)
        if waiting is not None:
            call = waiting[0]
            self._perform(call.tool.name, self._gates.wake(call.tool.name, ticket), {})

    def finished(self, ticket: int | None, result: HandlerResult) -> None:
        """A call's reply was taken: a started call's outcome goes to its gate (a refused
        call never started, and is not counted)."""
        call = self._running.pop(ticket, None) if ticket is not None else None
        if call is not None:
            self._perform(call.tool.name,
                          self._gates.finish(call.tool.name, call.ticket, result),
                          {call.ticket: call})

    def stop_work(self, run_id: str) -> None:
        """Drop the run's waiting calls (it ended): they neither start nor get an answer."""
        for ticket in self._by_run.pop(run_id, ()):
            self._withdraw(ticket)

    def _withdraw(self, ticket: int) -> None:
        waiting = self._waiting.pop(ticket, None)
        if waiting is not None:
            call, deadline = waiting
            if deadline is not None:
                deadline.cancel()
            self._gates.drop(call.tool.name, ticket)

    def close(self) -> None:
        """The orchestrator stops: its waiting calls are dropped and its started ones no
        longer counted (they were cancelled with their runs), so the gates, which outlive it,
        hold nothing of it; the timer thread is joined."""
        for run_id in list(self._by_run):
            self.stop_work(run_id)
        for ticket, call in self._running.items():
            self._gates.finish(call.tool.name, ticket, "ignored")
        self._running.clear()
        if self._timer is not None:
            self._timer.close()

    def _perform(self, tool_name: str, actions: Iterable[Action],
                 known: dict[int, GatedCall]) -> None:
        for action in actions:
            call = known.get(action.ticket) or self._running.get(action.ticket) \
                or self._unwait(action.ticket)
            known[action.ticket] = call
            match action:
                case Start():
                    self._running[action.ticket] = call
                    self._launch(call)
                case Refuse(refusal=refusal):
                    self._refuse(call, refusal)
                case WakeIn(seconds=seconds):
                    self._wait(call, seconds)
                case Moved(transition=move):
                    say_move(self._log, call.run_id, tool_name, move, self._on_progress)

    def _unwait(self, ticket: int) -> GatedCall:
        """A waiting call leaves the wait (to start or be refused)."""
        call, deadline = self._waiting.pop(ticket)
        if deadline is not None:
            deadline.cancel()
        tickets = self._by_run.get(call.run_id)
        if tickets is not None:
            tickets.discard(ticket)
            if not tickets:
                del self._by_run[call.run_id]
        return call

    def _wait(self, call: GatedCall, seconds: float | None) -> None:
        self._log.debug("call_waiting", run_id=call.run_id, tool_name=call.tool.name,
                        tool_call_id=call.call.id, seconds=seconds)
        deadline = None
        if seconds is not None:
            if self._timer is None:
                self._timer = DeadlineTimer("toolvisor-gates")
            deadline = self._timer.schedule(
                seconds, functools.partial(tell, self._me, GateWoke(call.ticket)))
        self._waiting[call.ticket] = (call, deadline)
        self._by_run.setdefault(call.run_id, set()).add(call.ticket)

    def _refuse(self, call: GatedCall, refusal: Refusal) -> None:
        answer(call.reply, call.call, call.tool.name,
               refused(self._log, call.run_id, call.call, call.tool.name, refusal))
