"""``RunObserver``: what the orchestrator tells people about its runs, as log events and
(when the agent traces) OpenTelemetry spans. It keeps each run's spans and its model call's
start, by run id, from the run's start to its end. Runs on the orchestrator's thread, which
owns that state, except ``ToolSpan``'s end, which runs where a call ends.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from toolvisor._logging import get_event_log, say_on_stderr
from toolvisor.contract import ModelError, ModelResponse
from toolvisor.host.observe._tracing import RunSpans, Scope, ToolSpan
from toolvisor.machine import CallToRun, Effect, LlmCall

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class RunEnds(Protocol):
    """Who is told that a run ended (the agent's background processes: they are cancelled)."""

    def run_ended(self, run_id: str) -> None: ...


TraceParent = Callable[[str], Mapping[str, str] | None]
"""The W3C trace headers a run's span is made under (a child run's: its parent call's)."""


@dataclass(eq=False, slots=True)
class _Observed:
    """What the observer keeps of one run while it is hosted here."""

    span: Span | None = None  # the run's span, when the agent traces
    model_span: Span | None = None  # the span of the model call in flight, when tracing
    model_started: tuple[int, int, float] | None = None  # (turn, attempt, monotonic start)
    # of the model call in flight


class RunObserver:
    """Logs model calls and run ends with their ids and durations; spans them if tracing;
    tells ``processes`` when a run ends (its processes but the detached ones are cancelled)."""

    def __init__(self, tracing: RunSpans | None,
                 on_progress: Callable[[str, str, dict[str, Any]], None] | None = None,
                 processes: RunEnds | None = None,
                 trace_parent: TraceParent | None = None) -> None:
        self.tracing = tracing
        self._on_progress = on_progress
        self._processes = processes
        self._trace_parent = trace_parent
        self._runs: dict[str, _Observed] = {}
        self._progress_failed = False  # whether on_progress's first failure was said
        self._log = get_event_log("orchestrator")

    def progress(self, run_id: str, event: str, data: dict[str, Any]) -> None:
        """A run's progress event: logged (debug), and told to ``on_progress``. Its fields are
        put together only when events go somewhere (several progress events per run)."""
        if self._log.enabled:
            self._log.debug("run_progress", run_id=run_id, progress=event, **data)
        self.tell_progress(run_id, event, data)

    def tool_progress(self, run_id: str, data: dict[str, Any]) -> None:
        """A running call's progress report: logged (``tool_progress``, info: the live view
        reads it), and told to ``on_progress`` as the progress event ``tool_progress``."""
        self._log.info("tool_progress", run_id=run_id, **data)
        self.tell_progress(run_id, "tool_progress", data)

    def tell_progress(self, run_id: str, event: str, data: dict[str, Any]) -> None:
        """Tell ``on_progress`` (if any); what it raises is logged with its traceback and
        ignored, and the first failure is said on stderr (as a failing log sink is)."""
        if self._on_progress is None:
            return
        try:
            self._on_progress(run_id, event, dict(data))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._log.error("progress_callback_failed", run_id=run_id, progress=event,
                            error=error, traceback="".join(traceback.format_exception(exc)))
            if not self._progress_failed:
                self._progress_failed = True
                say_on_stderr(f"the on_progress callback raised on {event!r} of run {run_id} "
                              f"({error}); its failures are ignored (the runs go on) and "
                              "logged as progress_callback_failed")

    def run_started(self, run_id: str, effects: list[Effect] | None) -> None:
        """A run came to this host: started with ``effects``, or restored (``None``)."""
        run = self._runs[run_id] = _Observed()
        if self.tracing is not None:
            fresh = effects is not None and any(
                isinstance(e, LlmCall) and e.turn == 1 and e.attempt == 1 for e in effects)
            parent = None if self._trace_parent is None else self._trace_parent(run_id)
            run.span = self.tracing.run_started(run_id, resumed=not fresh, parent=parent)

    def run_finished(self, run_id: str, outcome: Any) -> None:
        """The run leaves this host: ``outcome`` is its outcome, ``None`` if it was lost (the
        host stopped, or its lease went), ``"answer_refused"`` if a resume's answers were
        refused (it stays suspended)."""
        if self._processes is not None and getattr(outcome, "kind", None) in (
                "completed", "halted", "failed"):  # the run ended (a suspension goes on)
            self._processes.run_ended(run_id)
        run = self._runs.get(run_id)
        if run is None:
            return
        if run.model_started is not None:  # cancelled in flight
            self.model_answered(run_id, None)
        del self._runs[run_id]
        if run.span is not None and self.tracing is not None:
            kind = outcome if isinstance(outcome, str) else getattr(outcome, "kind", "lost")
            error = getattr(outcome, "reason", None) if kind == "halted" \
                else "failed" if kind == "failed" else "lost" if outcome is None else None
            self.tracing.run_finished(run.span, kind, error)

    def machine_event(self, run_id: str, event: str, fields: dict[str, Any]) -> None:
        """A machine log event (a policy decision, a retry, a suspension) as a span event."""
        span = self._span(run_id)
        if span is not None and self.tracing is not None:
            self.tracing.run_event(span, event, fields)

    def model_started(self, run_id: str, effect: LlmCall) -> None:
        run = self._runs.setdefault(run_id, _Observed())
        run.model_started = (effect.turn, effect.attempt, time.monotonic())
        if self._log.enabled:
            self._log.info("model_call_started", run_id=run_id, turn=effect.turn,
                           attempt=effect.attempt)
        if run.span is not None and self.tracing is not None:
            run.model_span = self.tracing.model_call(run.span, effect.turn, effect.attempt)

    def model_answered(self, run_id: str, answer: ModelResponse | ModelError | None) -> None:
        """The model call in flight answered (``None``: it was cancelled)."""
        run = self._runs.get(run_id)
        if run is None or run.model_started is None:
            return
        turn, attempt, started = run.model_started
        run.model_started = None
        if self._log.enabled:
            self._log_model_answered(run_id, answer, turn, attempt, started)
        if run.model_span is not None and self.tracing is not None:
            self.tracing.model_answered(run.model_span, answer)
            run.model_span = None

    def _log_model_answered(self, run_id: str, answer: ModelResponse | ModelError | None,
                            turn: int, attempt: int, started: float) -> None:
        fields: dict[str, Any] = {
            "run_id": run_id, "turn": turn, "attempt": attempt,
            "duration_ms": round((time.monotonic() - started) * 1000, 3)}
        if isinstance(answer, ModelResponse):
            usage = answer.usage
            self._log.info("model_call_finished", **fields, outcome="ok", model=answer.model,
                           finish_reason=answer.finish_reason,
                           input_tokens=None if usage is None else usage.input_tokens,
                           output_tokens=None if usage is None else usage.output_tokens)
        else:
            self._log.warning("model_call_finished", **fields,
                              outcome="cancelled" if answer is None else answer.reason,
                              error=None if answer is None else answer.message)

    def scope(self, run_id: str) -> Scope | None:
        """Makes the model call's span current where the call runs (an SDK's own spans then
        nest under it), if tracing."""
        run = self._runs.get(run_id)
        if run is None or run.model_span is None or self.tracing is None:
            return None
        return self.tracing.scope(run.model_span)

    def tool_call(self, run_id: str, planned: CallToRun, tool_name: str,
                  isolation: str) -> ToolSpan | None:
        """The span of a tool call attempt about to start, if tracing."""
        span = self._span(run_id)
        if span is None or self.tracing is None:
            return None
        call = planned.call
        return self.tracing.tool_call(span, tool_name=tool_name, call_id=call.id,
                                      turn=planned.turn, attempt=planned.attempt,
                                      isolation=isolation, arguments=call.arguments)

    def _span(self, run_id: str) -> Span | None:
        run = self._runs.get(run_id)
        return None if run is None else run.span
