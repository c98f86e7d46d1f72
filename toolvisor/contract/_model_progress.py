"""Progress of the model call in flight (a streamed text delta), reported to the run it serves.

A provider adapter calls :func:`report_model_progress` while it answers; the host that made the
call said where reports go (:func:`reporting_model_progress`, around that one call), so an
adapter needs no handle on a run. Outside a host's model call a report goes nowhere.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType
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


class _Reporting:
    """The block of :func:`reporting_model_progress`: one object for the whole model call (a
    generator-based context manager is two, each tracked by the collector while it waits)."""

    __slots__ = ("_sink", "_token")

    def __init__(self, sink: ModelProgressSink | None) -> None:
        self._sink = sink
        self._token: Token[ModelProgressSink | None] | None = None

    def __enter__(self) -> None:
        self._token = _sink.set(self._sink)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._token is not None:
            _sink.reset(self._token)
            self._token = None


def reporting_model_progress(sink: ModelProgressSink | None) -> _Reporting:
    """Within this block (one thread, or one task), reports go to ``sink``."""
    return _Reporting(sink)
