"""Finished tool calls on their way from the call actors' threads to the orchestrator.

A call actor's reply is bounded by the output budget on the call's own thread, then kept in
``FinishedCalls`` until the orchestrator drains it and sends it to its run's machine. Only the
call that finds the buffer empty tells the orchestrator, so calls that finish together reach
the machine as one ``ToolResults``: one message, one machine step and one checkpoint instead of
one per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykka import ActorRef

from toolvisor.actors import CallReply
from toolvisor.call import OutputProjection, ProjectionPoint
from toolvisor.contract import CallContext, OutputWindow
from toolvisor.host._mail import tell
from toolvisor.host._protocol import OutcomesReady
from toolvisor.host.models import NO_USAGE, CallCompletions
from toolvisor.host.observe import ToolSpan
from toolvisor.machine import CallOutcome, Effect, StateView, ToolResults, TurnMachine


@dataclass(frozen=True, slots=True)
class CallDone:
    """One finished call, as the machine will take it, and where it belongs."""

    run_id: str
    outcome: CallOutcome
    key: str | None  # the completion key the call's handler took, if any
    ticket: int | None = None  # the call's ticket at its tool's gate, if it has one


@dataclass(frozen=True, eq=False, slots=True)  # one call's: compared by identity
class CallTarget:
    """Where a call's reply goes, and the call's context and cancel token. Called with the
    reply (on the call actor's thread), it hands it to ``finished``: the call's ``reply_to``
    itself, so a call in flight holds no partial (and its bound method and arguments' tuple:
    three more objects the collector would track while the call waits)."""

    finished: FinishedCalls
    me: ActorRef[Any]
    run_id: str
    view: StateView
    ctx: CallContext
    token: threading.Event | None  # set at the reply: ends the call's durable waits and
    # its ctx.processes
    ticket: int | None = None  # the call's ticket at its tool's gate, if it has one
    span: ToolSpan | None = None  # the call's trace span, when the agent traces
    window: OutputWindow = "head"  # which end of its text the output budget keeps: its
    # tool's, resolved once when the call started (``head`` for a call of no tool)
    membership: Callable[[], dict[str, bool]] | None = None  # takes the catalog edits the
    # call made (its ctx.sessions'), for its outcome

    def __call__(self, reply: CallReply) -> None:
        self.finished.on_reply(self, reply)


class FinishedCalls:
    """Outcomes that call threads finished and the orchestrator has not taken yet.

    Call threads ``add`` (through :meth:`on_reply`); the orchestrator ``drain``s. The lock
    guards only the list.
    """

    def __init__(self, projection: OutputProjection) -> None:
        self._projection = projection
        self._lock = threading.Lock()
        self._items: list[CallDone] = []

    def add(self, done: CallDone) -> bool:
        """Keep ``done``; ``True`` if the orchestrator must be told."""
        with self._lock:
            self._items.append(done)
            return len(self._items) == 1

    def drain(self) -> list[CallDone]:
        with self._lock:
            items, self._items = self._items, []
        return items

    def on_reply(self, target: CallTarget, reply: CallReply) -> None:
        """On the call actor's thread: bound the text, keep the outcome, tell if needed.

        The call is over for the host, so its durable effects' cancel token is set: a handler
        the runner gave up on (timeout) stops awaiting external events; its direct completions
        in flight are cancelled, and what they spent goes with its outcome.
        """
        if target.token is not None:
            target.token.set()
        completions = target.ctx.direct_completions  # ended before the call's span ends
        usage = completions.end() if isinstance(completions, CallCompletions) else NO_USAGE
        if target.span is not None:
            target.span.end(reply.result, reply.text)
        text = bounded_text(self._projection, reply.text, target.window, reply.is_error)
        membership = {} if target.membership is None else target.membership()  # its catalog
        # edits go to the run's machine with it
        done = CallOutcome(reply.tool_call_id, reply.result, text, writes=target.view.writes,
                           usage=usage, membership=membership)
        keys = target.ctx.completion_keys
        if self.add(CallDone(target.run_id, done,
                             None if keys is None else keys.issued, target.ticket)):
            tell(target.me, OutcomesReady())


def bounded_text(projection: OutputProjection, text: str, window: OutputWindow,
                 is_error: bool) -> str:
    """A call's text as the output budget bounds it when the call ends (at dispatch, else in
    the history), keeping its ``window`` end."""
    if projection.applies_at("dispatch") or projection.applies_at("history"):
        point: ProjectionPoint = "dispatch" if projection.applies_at("dispatch") else "history"
        return projection.project(point, text, window=window, is_error=is_error)
    return text


def send_results(machine: TurnMachine, outcomes: tuple[CallOutcome, ...]) -> list[Effect]:
    """Send ``outcomes`` for the ``ToolCalls`` effect ``machine`` waits on now: a superseding
    effect took over the calls of the one before (a run that waits on none refuses them)."""
    waiting = machine.waiting_effect_id
    return machine.send(ToolResults(0 if waiting is None else waiting, outcomes))
