"""toolvisor's lifecycle events: structlog, quiet by default, one switch for the whole runtime.

Every layer logs through :func:`get_event_log`. While logging is off (the default) an event
costs one global read, so the per-call hot path stays cheap. :func:`configure_logging` turns it
on as JSON or console lines; ``toolvisor.testing.capture_events`` records events as dicts.
Events have stable names (``child_started``, ``call_finished``, ...) and bound ids.

A few warnings are for the user even while logging is off (a model that has not answered, a
model call retried): :meth:`EventLog.notify` sends them to the sink when one is installed, and
otherwise to Python's :mod:`logging` (logger ``toolvisor``) at WARNING, which prints them on
stderr with no set-up (its last-resort handler) and through the user's handlers when logging is
configured: never both, so a line is never printed twice.

Logging is the sink's business, never the runtime's: an event the sink cannot take (it
raised, say ``BrokenPipeError`` once the reader of stderr went away) is dropped and counted
(:func:`dropped_events`), and said once on stderr if stderr still works. A dropped event never
fails a call, a run or a supervisor.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, Literal, TextIO

import structlog

Level = Literal["debug", "info", "warning", "error"]
_LEVELS: dict[str, int] = {"debug": 10, "info": 20, "warning": 30, "error": 40}

EventSink = Callable[[str, str, dict[str, Any]], None]
"""Receives ``(level, event_name, fields)``."""

_sink: EventSink | None = None
_python_log = logging.getLogger("toolvisor")  # where notices go while no sink is installed


class _Drops:
    """The events dropped so far, and whether the current sink's first drop was told.

    Written by whichever thread drops an event, under ``lock``: a drop is rare, so the lock
    never touches the hot path.
    """

    __slots__ = ("count", "lock", "told")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.told = False

    def add(self) -> bool:
        """Count one drop; ``True`` if it is the first since the sink was installed."""
        with self.lock:
            self.count += 1
            first, self.told = not self.told, True
        return first


_drops = _Drops()


class EventLog:
    """A logger with bound fields; emits nothing unless logging is configured."""

    __slots__ = ("_bound",)

    def __init__(self, bound: dict[str, Any]) -> None:
        self._bound = bound

    def bind(self, **fields: Any) -> EventLog:
        """A logger that adds ``fields`` to every event."""
        return EventLog({**self._bound, **fields})

    @property
    def enabled(self) -> bool:
        """Whether events go anywhere now (skip building costly fields when not)."""
        return _sink is not None

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        sink = _sink
        if sink is not None:
            try:
                sink(level, event, {**self._bound, **fields})
            except Exception as exc:  # the sink's failure is the sink's: the event is dropped
                _drop(event, exc)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit("error", event, fields)

    def notify(self, event: str, text: str, **fields: Any) -> None:
        """A warning the user should see even with logging off: ``event`` goes to the sink
        when one is installed; otherwise ``text`` (a sentence that stands alone) goes to
        Python's logger ``toolvisor`` at WARNING, which reaches stderr with no set-up."""
        if _sink is not None:
            self._emit("warning", event, fields)
        else:
            _python_log.warning("toolvisor: %s", text)


def _drop(event: str, error: Exception) -> None:
    """Count an event the sink could not take; say so on stderr the first time for this sink
    (quietly not, when stderr is gone too: it may be the sink's own stream)."""
    if _drops.add():
        say_on_stderr(f"the log sink failed on {event!r} ({type(error).__name__}: {error}); "
                      "events it cannot take are dropped and counted "
                      "(toolvisor.dropped_events())")


def say_on_stderr(text: str) -> None:
    """Print ``toolvisor: {text}`` on stderr, for a callback of the user's that failed (a log
    sink, ``on_progress``): said once by the caller, never raised (quietly not, when stderr is
    gone too)."""
    with contextlib.suppress(Exception):
        print(f"toolvisor: {text}", file=sys.stderr, flush=True)


def dropped_events() -> int:
    """How many events this process dropped because the sink raised on them."""
    return _drops.count


def get_event_log(component: str, **bound: Any) -> EventLog:
    """The logger of one component (``supervisor``, ``tool_call``, ...)."""
    return EventLog({"component": component, **bound})


def set_event_sink(sink: EventSink | None) -> EventSink | None:
    """Send every toolvisor event to ``sink(level, event, fields)`` (``None``: quiet) and
    return the previous sink. ``configure_logging`` and ``testing.capture_events`` install one;
    a sink runs on the thread that emits the event, so keep it quick. What it raises drops
    that event (counted by :func:`dropped_events`; the first drop of each sink is said once on
    stderr), and never reaches the code that emitted it."""
    global _sink  # the single switch, read lock-free on the hot path
    with _drops.lock:
        previous, _sink = _sink, sink
        _drops.told = False
    return previous


def configure_logging(
    format: Literal["json", "console"] | None = "console",
    *,
    level: Level = "info",
    stream: TextIO | None = None,
) -> None:
    """Print toolvisor's events as JSON or console lines at ``level`` and above.

    ``format=None`` makes it quiet again. The output goes to ``stream`` (default stderr).
    Only toolvisor's own events are affected: the global structlog configuration is untouched.
    """
    if format is None:
        set_event_sink(None)
        return
    if format not in ("json", "console"):
        raise ValueError(f"logging format must be 'json', 'console' or None, got {format!r}")
    if level not in _LEVELS:
        raise ValueError(f"logging level must be one of {list(_LEVELS)}, got {level!r}")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    logger = structlog.wrap_logger(
        structlog.PrintLogger(stream or sys.stderr),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
    )

    def sink(event_level: str, event: str, fields: dict[str, Any]) -> None:
        getattr(logger, event_level)(event, **fields)

    set_event_sink(sink)
