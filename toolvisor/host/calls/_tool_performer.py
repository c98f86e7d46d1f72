"""``ToolCallPerformer``: performs one tool call under the agent's ``ToolRunner``, with explicit
inputs and no orchestrator.

A call as a run's host performs it: its context (ids, attempt, state view, progress sink, trace
span), its tool's gate passed first (it may wait there, or be refused without running), the
handler run by the runner (its isolation, deadline and idle timeout), its span ended with its
result, and its text bounded by the output budget; the outcome is the ``CallOutcome`` the run's
machine takes (with the call's state writes). The pieces are the orchestrator's own
(``call_context``, ``ToolProgress``, ``refused``, ``say_move``, ``bounded_text``, the
``RunSpans`` span); what differs is the waiting: the orchestrator never blocks (a gate's wait
is a message, a call's reply another), while :meth:`ToolCallPerformer.perform` blocks its
caller (a workflow's activity) until the call ends.

Thread-safety: ``perform`` may run on many threads at once. The gates are told on them under
one ``Condition``, which also guards each waiting ticket's verdict; the gates' own lock guards
the gates. Give a performer gates of its own: a gate's answer for a ticket that one
orchestrator's ``GatedCalls`` holds would not reach it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.actors import CallReply
from toolvisor.call import OutputProjection, encode_checked
from toolvisor.contract import CallContext, HandlerResult, Tool
from toolvisor.executor import ToolRunner
from toolvisor.host._protocol import ProgressCallback, ToolProgressed
from toolvisor.host.calls._call_context import call_context
from toolvisor.host.calls._finished_calls import bounded_text
from toolvisor.host.calls._gates import ToolGates, refused, say_move
from toolvisor.host.calls._tool_progress import ToolProgress
from toolvisor.host.models import NO_USAGE
from toolvisor.host.observe import RunSpans, ToolSpan
from toolvisor.machine import CallOutcome, CallToRun, StateView
from toolvisor.resilience import Action, Moved, Refusal, Refuse, Start, WakeIn


def _no_progress(run_id: str, event: str, data: dict[str, Any]) -> None:
    """Where progress goes when the caller wants none."""


@dataclass(eq=False, slots=True)
class _Waiting:
    """A ticket at its gate: whether it may start, or why it is refused, and when it is to
    ask its gate again (``None``: when another call's end lets it in)."""

    verdict: bool | Refusal | None = None
    wake_at: float | None = None


class ToolCallPerformer:
    """Performs single tool calls of an agent's runs, blocking the caller until each ends.

    Args:
        runner: The agent's runner (isolation backends, deadlines, pools).
        gates: The tools' breakers, bulkheads and rate limits (``ToolGates()``: none).
        projection: The output budget, which bounds each call's text.
        spans: Makes each call's ``execute_tool`` span (``None``: no tracing).
        on_progress: Told ``(run_id, event, data)``: each ``tool_progress`` report of a call,
            and each breaker's move.
        context: The application's context every call is given (``ctx.context``).
    """

    def __init__(self, runner: ToolRunner, *, gates: ToolGates | None = None,
                 projection: OutputProjection | None = None, spans: RunSpans | None = None,
                 on_progress: ProgressCallback = _no_progress, context: Any = None) -> None:
        self._runner = runner
        self._gates = ToolGates() if gates is None else gates
        self._projection = OutputProjection() if projection is None else projection
        self._spans = spans
        self._on_progress = on_progress
        self._context = context
        self._desk = threading.Condition()
        self._waiting: dict[int, _Waiting] = {}  # by ticket, under _desk
        self._log = get_event_log("gates")

    def perform(self, run_id: str, tool: Tool, planned: CallToRun, *,
                run_span: Any = None) -> CallOutcome:
        """Perform ``planned`` (a call the machine planned, of ``tool``) for run ``run_id``;
        its outcome, as the machine takes it.

        Args:
            run_id: The run the call is of.
            tool: The tool the call names (resolved by the caller: its run's catalog).
            planned: The call, its turn, attempt and the run's state it sees.
            run_span: The run's span the call's span nests under (with ``spans``).
        """
        call = planned.call
        span: ToolSpan | None = None
        if self._spans is not None and run_span is not None:
            span = self._spans.tool_call(run_span, tool_name=tool.name, call_id=call.id,
                                         turn=planned.turn, attempt=planned.attempt,
                                         isolation=tool.isolation or "none",
                                         arguments=call.arguments)
        view = StateView(planned.state)
        ctx = call_context(run_id, planned, view, context=self._context, span=span,
                           progress=ToolProgress(self._progressed, run_id, planned, tool.name,
                                                 span))
        ticket = self._gates.ticket(tool.name)
        refusal = None if ticket is None else self._pass_gate(run_id, tool.name, ticket)
        result: HandlerResult = refused(self._log, run_id, call, tool.name, refusal) \
            if refusal is not None else self._run(run_id, tool, call.arguments, ctx, ticket)
        checked, text = encode_checked(result, tool_name=tool.name, tool_call_id=call.id)
        reply = CallReply(call.id, tool.name, checked, text)
        if span is not None:
            span.end(reply.result, reply.text)
        return CallOutcome(call.id, reply.result,
                           bounded_text(self._projection, reply.text, tool.output_window,
                                        reply.is_error),
                           writes=view.writes, usage=NO_USAGE, membership={})

    def _run(self, run_id: str, tool: Tool, arguments: Any, ctx: CallContext,
             ticket: int | None) -> HandlerResult:
        """Run the call under the runner; its outcome goes to its gate (``ignored`` if the
        runner itself raised)."""
        result: HandlerResult | None = None
        try:
            result = self._runner.run(tool, arguments, ctx)
        finally:
            if ticket is not None:
                self._finished(run_id, tool.name, ticket, result)
        return result

    def _progressed(self, report: ToolProgressed) -> None:
        self._on_progress(report.run_id, "tool_progress", report.data)

    def _pass_gate(self, run_id: str, tool_name: str, ticket: int) -> Refusal | None:
        """Wait at the tool's gate until the call may start (``None``) or is refused."""
        with self._desk:
            waiting = self._waiting[ticket] = _Waiting()
            try:
                self._perform(run_id, tool_name, self._gates.arrive(tool_name, ticket))
                while waiting.verdict is None:
                    left = None if waiting.wake_at is None else waiting.wake_at - time.monotonic()
                    if left is not None and left <= 0:
                        waiting.wake_at = None
                        self._perform(run_id, tool_name, self._gates.wake(tool_name, ticket))
                        continue
                    self._desk.wait(left)
            except BaseException:
                self._gates.drop(tool_name, ticket)
                raise
            finally:
                del self._waiting[ticket]
        verdict = waiting.verdict
        return verdict if isinstance(verdict, Refusal) else None

    def _finished(self, run_id: str, tool_name: str, ticket: int,
                  result: HandlerResult | None) -> None:
        """The call ended: its outcome goes to its gate (which may let others in)."""
        with self._desk:
            self._perform(run_id, tool_name, self._gates.finish(
                tool_name, ticket, "ignored" if result is None else result))

    def _perform(self, run_id: str, tool_name: str, actions: Iterable[Action]) -> None:
        """Do what the gate answered (under ``_desk``): start, refuse or time a waiting
        ticket; log and tell a breaker's move."""
        for action in actions:
            waiting = self._waiting.get(action.ticket)
            match action:
                case Start() if waiting is not None:
                    waiting.verdict = True
                case Refuse(refusal=refusal) if waiting is not None:
                    waiting.verdict = refusal
                case WakeIn(seconds=seconds) if waiting is not None:
                    waiting.wake_at = None if seconds is None else time.monotonic() + seconds
                case Moved(transition=move):
                    say_move(self._log, run_id, tool_name, move, self._on_progress)
        self._desk.notify_all()
