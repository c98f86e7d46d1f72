"""``RemoteSpans``: the spans a handler makes in a worker process or a Ray task, made here.

A worker's OpenTelemetry tracer (``isolation/_link/_worker_tracing.py``) forwards each span to
the agent over the call's context link; this makes it a real span of the agent's tracer, a child
of the call's ``execute_tool`` span (or of another such span), so it reaches the agent's
exporters, and answers with its ids, which the worker makes current (its outgoing calls
propagate them). Served on the call's link thread; ``ToolSpan.end`` (the call actor's thread)
ends what the handler left open, so the table of open spans is under a lock.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

APPLIED = frozenset({"set_attribute", "set_attributes", "add_event", "set_status",
                     "update_name", "record_exception"})
"""The span methods a worker may have called."""


class RemoteSpans:
    """Serves ``CallContext.trace_spans`` for one call attempt (see the module)."""

    def __init__(self, tracer: Tracer, call_span: Span) -> None:
        self._tracer = tracer
        self._call_span = call_span
        self._lock = threading.Lock()
        self._open: dict[int, Span] = {}
        self._handles = itertools.count(1)

    def start(self, name: str, parent: int | None, kind: str, attributes: dict[str, Any],
              start_time: int | None) -> tuple[int, int, int]:
        from opentelemetry import trace  # noqa: PLC0415

        with self._lock:
            parent_span = self._call_span if parent is None else self._open.get(parent)
        if parent_span is None:
            raise ValueError(f"no open span {parent!r} of this call to start a child of")
        span = self._tracer.start_span(
            str(name), context=trace.set_span_in_context(parent_span),
            kind=trace.SpanKind[kind] if kind in trace.SpanKind.__members__
            else trace.SpanKind.INTERNAL,
            attributes=attributes, start_time=start_time)
        context = span.get_span_context()
        with self._lock:
            handle = next(self._handles)
            self._open[handle] = span
        return handle, context.trace_id, context.span_id

    def apply(self, handle: int, method: str, args: tuple[Any, ...]) -> None:
        if method not in APPLIED:
            raise ValueError(f"a worker's span cannot {method!r}")
        with self._lock:
            span = self._open.get(handle)
        if span is None:
            return  # ended already: as a real span ignores calls after its end
        if method == "set_status":
            from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

            code, description = args
            span.set_status(Status(StatusCode[code], description))
            return
        getattr(span, method)(*args)

    def end(self, handle: int, end_time: int | None) -> None:
        with self._lock:
            span = self._open.pop(handle, None)
        if span is not None:
            span.end(end_time=end_time)

    def end_all(self) -> None:
        """End what the handler left open (its call is over)."""
        with self._lock:
            spans, self._open = list(self._open.values()), {}
        for span in spans:
            span.end()
