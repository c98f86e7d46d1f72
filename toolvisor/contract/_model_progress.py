"""Progress of the model call in flight (a streamed text delta), reported to the run it serves.

A provider adapter calls :func:`report_model_progress` while it answers; the host that made the
call said where reports go (:func:`reporting_model_progress`, around that one call), so an
adapter needs no handle on a run. Outside a host's model call a report goes nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeAlias

ModelProgressSink: TypeAlias = Callable[[str, dict[str, Any]], None]
"""Where a model call's progress goes: ``(event, data)``."""

_sink: ContextVar[ModelProgressSink | None] = ContextVar("toolvisor_model_progress",
                                                           default=None)


def report_model_progress(event: str, **data: Any) -> None:
    """Tell the run whose model call this is that ``event`` happened (``model_text_delta``...)."""
    sink = _sink.get()
    if sink is not None:
        sink(event, data)


@contextmanager
def reporting_model_progress(sink: ModelProgressSink | None) -> Iterator[None]:
    """Within this block (one thread, or one task), reports go to ``sink``."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)
