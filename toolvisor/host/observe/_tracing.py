"""OpenTelemetry spans of an agent's runs, after the GenAI semantic conventions (v1.37).

One ``invoke_agent {agent}`` span per run (each ``run``, ``resume`` or restore of it), one
``chat {model}`` span per model call attempt and one ``execute_tool {tool}`` span per tool
call attempt, children of their run's span. Spans are started and ended with explicit
parents, so the tree holds whichever thread (the orchestrator's, a call actor's, the event
loop's) ends a span. A supervisor's restart or give-up is an event on every run span in
flight, or a span of its own when none is. ``opentelemetry`` is imported only when an agent is
given (or finds) a tracer provider; without one there is no ``RunSpans`` and every hook is one
``None`` check.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolvisor.contract import (
    Err,
    HandlerResult,
    ModelError,
    ModelResponse,
    ToolError,
    result_outcome,
)
from toolvisor.host.observe._remote_spans import RemoteSpans

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

SEMCONV_VERSION = "1.37.0"
_TOOL_TYPE = "function"
Scope = Callable[[], AbstractContextManager[Any]]
"""Entered around a piece of work where it runs (its trace span made current there)."""

_CONTENT_LIMIT = 4096  # characters of arguments or results kept on a span


def tracer_provider_in_use(given: TracerProvider | None) -> TracerProvider | None:
    """``given``, else the global provider if the application set one (else ``None``).

    Looks for ``opentelemetry`` only if the application imported it: nothing is imported here.
    """
    if given is not None:
        return given
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace  # noqa: PLC0415 (imported only when traces are wanted)

    provider = trace.get_tracer_provider()
    return None if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider) \
        else provider


def tracing_for(model: Any, provider: TracerProvider | None, *, agent_name: str,
                record_content: bool) -> RunSpans | None:
    """The agent's ``RunSpans``, or ``None`` when there is no tracer provider to use."""
    provider = tracer_provider_in_use(provider)
    if provider is None:
        return None
    provider_name, model_name = model_names(model)
    return RunSpans(provider, agent_name=agent_name, model_name=model_name,
                    provider_name=provider_name, record_content=record_content)


def model_names(model: Any) -> tuple[str, str]:
    """``(provider name, model name)`` of a model, as its spans say them."""
    module = type(model).__module__
    provider_name = "anthropic" if module.endswith("_anthropic") \
        else "openai" if module.startswith("toolvisor.models") else type(model).__name__
    return provider_name, str(getattr(model, "model", None) or type(model).__name__)


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text[:_CONTENT_LIMIT]


@dataclass(frozen=True, slots=True)
class ToolSpan:
    """One tool call attempt's span; :meth:`end` once, on whichever thread the call ends."""

    span: Span
    record_content: bool
    remote: RemoteSpans  # the spans of a handler that runs out of process

    def scope(self) -> AbstractContextManager[Any]:
        """The span as the current one (not ended on exit), where the handler runs."""
        from opentelemetry.trace import use_span  # noqa: PLC0415

        return use_span(self.span, end_on_exit=False, record_exception=False,
                        set_status_on_exception=False)

    def progress(self, message: str, fraction: float | None) -> None:
        """The handler reported progress: an event ``tool_progress`` (``message``, and
        ``fraction`` when known)."""
        attributes: dict[str, Any] = {"message": message}
        if fraction is not None:
            attributes["fraction"] = fraction
        self.span.add_event("tool_progress", attributes)

    def end(self, result: HandlerResult, text: str) -> None:
        """Set the outcome (``error.type`` and status ``ERROR`` for a failure) and end."""
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

        span = self.span
        outcome = result_outcome(result)
        span.set_attribute("toolvisor.call.outcome", outcome)
        if isinstance(result, Err):
            error_type = "tool_error" if outcome == "err" else outcome
            span.set_attribute("error.type", error_type)
            reason = result.reason
            if isinstance(reason, ToolError) and reason.code is not None:
                span.set_attribute("toolvisor.error.code", reason.code)
            span.set_status(Status(StatusCode.ERROR, text[:_CONTENT_LIMIT]))
        if self.record_content:
            span.set_attribute("gen_ai.tool.call.result", _clip(text))
        self.remote.end_all()
        span.end()


class RunSpans:
    """Makes the spans of one agent's runs. Thread-safe: its one mutable state, the spans of
    the runs in flight (where a supervisor's restart is told), is under a lock."""

    def __init__(self, provider: TracerProvider, *, agent_name: str, model_name: str,
                 provider_name: str, record_content: bool) -> None:
        from opentelemetry import trace  # noqa: PLC0415

        self._tracer: Tracer = provider.get_tracer(
            "toolvisor", schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}")
        self._agent_name = agent_name
        self._model_name = model_name
        self._provider_name = provider_name
        self._record_content = record_content
        self._trace = trace
        self._lock = threading.Lock()
        self._live: set[Span] = set()

    def run_started(self, run_id: str, *, resumed: bool,
                    parent: Mapping[str, str] | None = None) -> Span:
        """The span of one run's stretch on this host (a ``run``, ``resume`` or restore); a
        child session's is made under its parent call's span (``parent``: its W3C headers)."""
        context = None
        if parent:
            from opentelemetry import propagate  # noqa: PLC0415

            context = propagate.extract(dict(parent))
        span = self._tracer.start_span(
            f"invoke_agent {self._agent_name}", kind=self._trace.SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": self._agent_name,
                        "gen_ai.conversation.id": run_id,
                        "gen_ai.provider.name": self._provider_name,
                        "gen_ai.request.model": self._model_name,
                        "toolvisor.run.resumed": resumed}, context=context)
        with self._lock:
            self._live.add(span)
        return span

    def supervisor_event(self, event: str, fields: dict[str, Any]) -> None:
        """A supervisor of the agent's tree restarted a child or gave up (its ``on_event``):
        an event ``supervisor.{event}`` on every run span in flight, since the restart is
        part of their story; with no run in flight, a span ``supervisor {event}`` of its
        own that carries the event."""
        name = f"supervisor.{event}"
        with self._lock:  # held: a run span leaves the set before it ends
            live = bool(self._live)
            for span in self._live:
                self.run_event(span, name, fields)
        if not live:
            span = self._tracer.start_span(
                f"supervisor {event}", kind=self._trace.SpanKind.INTERNAL,
                attributes={"gen_ai.agent.name": self._agent_name,
                            "toolvisor.supervisor.id": str(fields.get("supervisor_id"))})
            self.run_event(span, name, fields)
            span.end()

    def run_event(self, run_span: Span, event: str, fields: dict[str, Any]) -> None:
        """A machine event (a policy decision, a retry, a suspension) on the run's span."""
        run_span.add_event(event, {k: v if isinstance(v, bool | int | float | str) else _clip(v)
                                   for k, v in fields.items() if v is not None})

    def run_finished(self, run_span: Span, outcome: str, error: str | None) -> None:
        """End the run's span: ``outcome`` is the outcome's kind; ``error`` a failure."""
        run_span.set_attribute("toolvisor.run.outcome", outcome)
        if error is not None:
            run_span.set_attribute("error.type", error)
            run_span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        with self._lock:
            self._live.discard(run_span)
        run_span.end()

    def model_call(self, run_span: Span, turn: int, attempt: int) -> Span:
        """The span of one model call attempt."""
        return self._tracer.start_span(
            f"chat {self._model_name}", kind=self._trace.SpanKind.CLIENT,
            context=self._trace.set_span_in_context(run_span),
            attributes={"gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": self._provider_name,
                        "gen_ai.request.model": self._model_name,
                        "toolvisor.turn": turn, "toolvisor.attempt": attempt})

    def completion_call(self, tool_span: ToolSpan, names: tuple[str, str], *, source: str,
                        attempt: int) -> Span:
        """The span of one attempt of a tool call's direct completion, a child of the call's
        span; ``names`` are the asked model's provider and model names."""
        provider_name, model_name = names
        return self._tracer.start_span(
            f"chat {model_name}", kind=self._trace.SpanKind.CLIENT,
            context=self._trace.set_span_in_context(tool_span.span),
            attributes={"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name,
                        "gen_ai.request.model": model_name,
                        "toolvisor.completion.source": source, "toolvisor.attempt": attempt})

    def scope(self, span: Span) -> Scope:
        """Enters ``span`` as the current span (without ending it) where the work runs."""
        return functools.partial(self._trace.use_span, span, end_on_exit=False,
                                 record_exception=False, set_status_on_exception=False)

    def model_answered(self, span: Span, answer: ModelResponse | ModelError | None) -> None:
        """End a model call's span with what it answered (``None``: it was cancelled)."""
        if isinstance(answer, ModelResponse):
            if answer.model:
                span.set_attribute("gen_ai.response.model", answer.model)
            if answer.response_id:
                span.set_attribute("gen_ai.response.id", answer.response_id)
            span.set_attribute("gen_ai.response.finish_reasons", [answer.finish_reason])
            usage = answer.usage
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        else:
            reason = "cancelled" if answer is None else answer.reason
            span.set_attribute("error.type", reason)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, reason))
        span.end()

    def tool_call(self, run_span: Span, *, tool_name: str, call_id: str, turn: int,
                  attempt: int, isolation: str, arguments: Any) -> ToolSpan:
        """The span of one tool call attempt, ended by :meth:`ToolSpan.end`."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": _TOOL_TYPE,
            "toolvisor.turn": turn, "toolvisor.attempt": attempt,
            "toolvisor.isolation": isolation}
        if self._record_content:
            attributes["gen_ai.tool.call.arguments"] = _clip(arguments)
        span = self._tracer.start_span(
            f"execute_tool {tool_name}", kind=self._trace.SpanKind.INTERNAL,
            context=self._trace.set_span_in_context(run_span), attributes=attributes)
        return ToolSpan(span, self._record_content, RemoteSpans(self._tracer, span))
