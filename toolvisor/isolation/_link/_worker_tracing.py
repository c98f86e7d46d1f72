"""A worker's OpenTelemetry tracer whose spans are made in the agent's trace.

Installed in a worker process (or a Ray worker) as the global tracer provider, once, the first
time a traced call runs there, and only if the program set none. A handler's
``trace.get_tracer(...)`` spans are then forwarded over its call's context link to the agent
(``host/observe/_remote_spans.py``), which makes them real spans of its own tracer under the call's
``execute_tool`` span, so they reach the agent's exporters; the span ids the agent answers
with are the ones the worker makes current and propagates. ``_current`` names the call the
running code belongs to (a context variable: a thread the handler starts has none, and its
spans are not recorded). Tracing never fails a handler: a span whose link is gone is dropped.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import Attributes, AttributeValue

from toolvisor.isolation._link._asking import Asks, portable

_Call = tuple[Asks, int]
_current: ContextVar[_Call | None] = ContextVar("toolvisor_traced_call", default=None)
_lock = threading.Lock()
_installed = False  # guarded by _lock


@contextlib.contextmanager
def forwarding(link: Asks, tag: int) -> Iterator[None]:
    """While the handler of call ``tag`` runs, its spans go to the agent over ``link``."""
    _install()
    token = _current.set((link, tag))
    try:
        yield
    finally:
        _current.reset(token)


def _install() -> None:
    global _installed  # noqa: PLW0603 - one provider per process
    with _lock:
        if _installed:
            return
        _installed = True
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(_LinkedTracerProvider())


class _LinkedTracerProvider(trace.TracerProvider):
    def get_tracer(self, instrumenting_module_name: str,
                   instrumenting_library_version: str | None = None,
                   schema_url: str | None = None, attributes: Attributes | None = None
                   ) -> trace.Tracer:
        return _LinkedTracer()


class _LinkedTracer(trace.Tracer):
    def start_span(self, name: str, context: Context | None = None,  # noqa: PLR0917 (the API's)
                   kind: SpanKind = SpanKind.INTERNAL, attributes: Attributes = None,
                   links: Sequence[Link] | None = None, start_time: int | None = None,
                   record_exception: bool = True, set_status_on_exception: bool = True
                   ) -> trace.Span:
        parent = trace.get_current_span(context)
        call = _current.get()
        if call is None:
            return trace.NonRecordingSpan(parent.get_span_context())
        parent_handle = parent.handle if isinstance(parent, _LinkedSpan) \
            and parent.call == call else None
        link, tag = call
        try:
            handle, trace_id, span_id = link.ask(tag, "trace_spans", "start", name,
                                                 parent_handle, kind.name,
                                                 dict(attributes or {}), start_time)
        except Exception:
            return trace.NonRecordingSpan(parent.get_span_context())
        context_ = SpanContext(trace_id, span_id, is_remote=False,
                               trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return _LinkedSpan(call, handle, context_)

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]  # noqa: PLR0917 (the API's)
            self, name: str, context: Context | None = None,
            kind: SpanKind = SpanKind.INTERNAL, attributes: Attributes = None,
            links: Sequence[Link] | None = None, start_time: int | None = None,
            record_exception: bool = True, set_status_on_exception: bool = True,
            end_on_exit: bool = True) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time,
                               record_exception, set_status_on_exception)
        with trace.use_span(span, end_on_exit=end_on_exit, record_exception=record_exception,
                            set_status_on_exception=set_status_on_exception) as current:
            yield current


class _LinkedSpan(trace.Span):
    """A span of the agent's trace, seen from the worker: each method is a request."""

    def __init__(self, call: _Call, handle: int, context: SpanContext) -> None:
        self.call = call
        self.handle = handle
        self._context = context
        self._ended = False

    def _ask(self, method: str, *args: Any) -> None:
        link, tag = self.call
        with contextlib.suppress(Exception):  # a trace never fails the handler
            link.ask(tag, "trace_spans", method, *args)

    def _apply(self, method: str, *args: Any) -> None:
        if not self._ended:
            self._ask("apply", self.handle, method, args)

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return not self._ended

    def end(self, end_time: int | None = None) -> None:
        if not self._ended:
            self._ended = True
            self._ask("end", self.handle, end_time)

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self._apply("set_attributes", dict(attributes))

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self._apply("set_attribute", key, value)

    def add_event(self, name: str, attributes: Attributes = None,
                  timestamp: int | None = None) -> None:
        self._apply("add_event", name, dict(attributes or {}), timestamp)

    def update_name(self, name: str) -> None:
        self._apply("update_name", name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if isinstance(status, Status):
            self._apply("set_status", status.status_code.name, status.description)
        else:
            self._apply("set_status", status.name, description)

    def record_exception(self, exception: BaseException, attributes: Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        self._apply("record_exception", portable(exception), dict(attributes or {}),
                    timestamp, escaped)
