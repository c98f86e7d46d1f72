"""``GateKeeper``: the per-tool breakers, bulkheads and rate limits in front of adapter calls.

One ``ToolGate`` per guarded tool (``toolvisor.resilience``), shared by every call of a
``SupervisedCalls``. Its lock guards the gates and the calls waiting at them: whichever thread
a call arrives, finishes or wakes on passes its gate under the lock and settles the waiting
calls' futures (start, or a refusal); a wait the gate asks for (``WakeIn``) is one deadline on
the keeper's timer thread, which only wakes the gate. An unguarded tool costs one dict lookup.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import TypeAlias

from toolvisor._logging import get_event_log
from toolvisor.contract import Err, HandlerResult, ToolError
from toolvisor.executor import DeadlineTimer
from toolvisor.resilience import Action, Moved, Refusal, Refuse, Resilience, Start, ToolGate, WakeIn

ResilienceConfig: TypeAlias = Resilience | Mapping[str, Resilience] | None
"""One ``Resilience`` for every tool, one per tool name, or none."""

Admission: TypeAlias = "Future[Refusal | None]"
"""Settled with ``None`` when the call may start, or with why it may not."""

_MOVES = {"open": "circuit_opened", "half_open": "circuit_half_opened",
          "closed": "circuit_closed"}


class GateKeeper:
    """Every guarded tool's gate and the calls waiting at them. Thread-safe (one lock)."""

    def __init__(self, config: ResilienceConfig, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if config is not None and not isinstance(config, Resilience | Mapping):
            raise TypeError(f"resilience must be a Resilience, a mapping from tool name to "
                            f"Resilience, or None; got {type(config).__name__}")
        mapping = config if isinstance(config, Mapping) else {}
        for name, each in mapping.items():
            if not isinstance(name, str) or not isinstance(each, Resilience):
                raise TypeError(f"resilience maps tool names to Resilience, got {name!r}: "
                                f"{type(each).__name__}")
        self._default = config if isinstance(config, Resilience) else None
        self._clock = clock
        self._lock = threading.Lock()
        self._gates = {name: ToolGate(name, each, clock=clock) for name, each in mapping.items()}
        self._waiting: dict[int, Admission] = {}
        self._tickets = itertools.count(1)
        self._timer: DeadlineTimer | None = None  # started on the first wait
        self._log = get_event_log("adapter_gates")

    def arrive(self, tool_name: str) -> tuple[int | None, Admission]:
        """A call of ``tool_name`` wants to run: its ticket (``None``: the tool has no gate)
        and its admission, settled now or when a slot or token frees."""
        admission: Admission = Future()
        if self._default is None and tool_name not in self._gates:
            admission.set_result(None)
            return None, admission
        with self._lock:
            gate = self._gate(tool_name)
            ticket = next(self._tickets)
            self._waiting[ticket] = admission
            self._perform(gate, gate.arrive(ticket))
        return ticket, admission

    def finish(self, tool_name: str, ticket: int | None, result: HandlerResult) -> None:
        """A started call ended with ``result``: its breaker counts it, its slot frees."""
        if ticket is not None:
            with self._lock:
                gate = self._gate(tool_name)
                self._perform(gate, gate.finish(ticket, result))

    def withdraw(self, tool_name: str, ticket: int | None) -> None:
        """A waiting call was cancelled: it leaves its gate without being counted."""
        if ticket is not None:
            with self._lock:
                if self._waiting.pop(ticket, None) is not None:
                    self._gate(tool_name).drop(ticket)

    def close(self) -> None:
        """Stop the timer thread; calls still waiting are refused."""
        with self._lock:
            waiting, self._waiting = self._waiting, {}
            timer, self._timer = self._timer, None
        for admission in waiting.values():
            admission.set_result(Refusal("handler_exit", "closed",
                                         "the adapter was closed before the call could start"))
        if timer is not None:
            timer.close()

    def _wake(self, tool_name: str, ticket: int) -> None:
        with self._lock:
            gate = self._gate(tool_name)
            self._perform(gate, gate.wake(ticket))

    def _gate(self, tool_name: str) -> ToolGate:
        gate = self._gates.get(tool_name)
        if gate is None:
            assert self._default is not None, tool_name
            gate = self._gates[tool_name] = ToolGate(tool_name, self._default,
                                                     clock=self._clock)
        return gate

    def _perform(self, gate: ToolGate, actions: Iterable[Action]) -> None:
        """Carry out what the gate answered (under the lock)."""
        for action in actions:
            match action:
                case Start(ticket=ticket):
                    self._settle(ticket, None)
                case Refuse(ticket=ticket, refusal=refusal):
                    self._settle(ticket, refusal)
                case WakeIn(ticket=ticket, seconds=seconds) if seconds is not None:
                    if self._timer is None:
                        self._timer = DeadlineTimer("toolvisor-adapter-gates")
                    self._timer.schedule(seconds, functools.partial(self._wake, gate.name,
                                                                    ticket))
                case Moved(transition=move):
                    event = _MOVES[move.after]
                    log = self._log.warning if move.after == "open" else self._log.info
                    log(event, tool_name=gate.name, before=move.before, why=move.why)

    def _settle(self, ticket: int, refusal: Refusal | None) -> None:
        admission = self._waiting.pop(ticket, None)
        if admission is not None:
            admission.set_result(refusal)


def refused(tool_name: str, tool_call_id: str, refusal: Refusal) -> Err:
    """The ``Err`` a call refused at its gate ends with (it did not run); logged
    ``call_refused``."""
    get_event_log("adapter_gates").info("call_refused", tool_name=tool_name,
                                        tool_call_id=tool_call_id, code=refusal.code,
                                        retry_in=refusal.retry_in)
    metadata = {} if refusal.retry_in is None else {"retry_in": round(refusal.retry_in, 3)}
    return Err(ToolError(refusal.reason, f"tool error ({tool_name}): {refusal.reason}: "
                         f"{refusal.message}", tool_name=tool_name, tool_call_id=tool_call_id,
                         code=refusal.code, metadata=metadata))
