"""Observing runs: their log events and progress, and (when the agent traces) their spans."""

from toolvisor.host.observe._observing import RunEnds, RunObserver, TraceParent
from toolvisor.host.observe._tracing import (
    SEMCONV_VERSION,
    RunSpans,
    Scope,
    ToolSpan,
    model_names,
    tracing_for,
)

__all__ = [
    "SEMCONV_VERSION",
    "RunEnds",
    "RunObserver",
    "RunSpans",
    "Scope",
    "ToolSpan",
    "TraceParent",
    "model_names",
    "tracing_for",
]
