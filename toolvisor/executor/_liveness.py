"""``Liveness``: a call's progress sink inside the runner, which keeps its idle deadline.

Every call the runner admits gets one as ``ctx.progress`` (but one started without a context,
to a tool without ``idle_timeout``: nothing would read it). Each report or heartbeat notes the
time (on the runner's clock) and a report goes on to the sink the caller gave (the host's, an
MCP server's); once the call has settled, reports go nowhere. For a tool with
``idle_timeout``, one deadline on the runner's timer comes due ``idle_timeout`` after the
last sign of life it knows of: then it looks at the time of the last one, and either fires (the
call is idle) or comes due again that much later. So a heartbeat costs a clock read, never a
reschedule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from toolvisor.contract import ProgressSink
from toolvisor.executor._deadlines import Deadline, DeadlineTimer


class Liveness:
    """What the runner puts into a call's context as ``progress``.

    ``_last`` is written by whichever thread reports (a float store, atomic) and read by the
    timer's thread; ``_lock`` guards ``_deadline`` and ``_done``, written by the thread that
    arms the call, the timer's and the one that settles it.
    """

    __slots__ = ("_clock", "_deadline", "_done", "_last", "_lock", "_upstream")

    def __init__(self, upstream: ProgressSink | None, clock: Callable[[], float]) -> None:
        self._upstream = upstream
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()
        self._deadline: Deadline | None = None
        self._done = False

    def report(self, message: str, fraction: float | None) -> None:
        """A progress report: a sign of life, passed on while the call runs."""
        self._last = self._clock()
        if not self._done and self._upstream is not None:
            self._upstream.report(message, fraction)

    def heartbeat(self) -> None:
        """A sign of life and nothing more."""
        self._last = self._clock()
        if not self._done and self._upstream is not None:
            self._upstream.heartbeat()

    def watch(self, timer: DeadlineTimer, seconds: float, on_idle: Callable[[], None]) -> None:
        """From now (the handler starts), call ``on_idle`` on ``timer``'s thread once no sign
        of life came for ``seconds``."""

        def due() -> None:
            idle_for = self._clock() - self._last
            with self._lock:
                if self._done:
                    return
                if idle_for < seconds:
                    self._deadline = timer.schedule(seconds - idle_for, due)
                    return
            on_idle()

        self._last = self._clock()
        with self._lock:
            if not self._done:
                self._deadline = timer.schedule(seconds, due)

    def cancel(self) -> None:
        """The call settled: no idle deadline any more, and later reports go nowhere."""
        with self._lock:
            self._done = True
            deadline, self._deadline = self._deadline, None
        if deadline is not None:
            deadline.cancel()
