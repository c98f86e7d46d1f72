"""Tool progress across MCP, both ways.

Served (``ToolServer``): a call whose client sent a progress token gets an ``McpProgress`` as
its context's progress sink, so each ``ctx.report_progress`` becomes the client's
``notifications/progress``: ``progress`` is the fraction with ``total`` 1 when the report has
one, else the count of reports so far with no ``total``; the message goes as it is.

As a client (``McpToolProvider``): :func:`progress_callback` turns a server's notifications for
a call back into that call's ``ctx.report_progress`` (the fraction is ``progress / total``
when the server gives a total, clamped to [0, 1]), so they reach ``on_progress`` and the rest
as any tool's would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from mcp.shared.dispatcher import ProgressFnT

ReportProgress = Callable[[str, float | None], None]
"""A call's ``ctx.report_progress``."""


class McpProgress:
    """Sends one served call's reports to its client, in order, on the server's event loop.

    ``report`` runs on whichever thread the handler reports from; it only counts (under
    ``_lock``) and hands the notification to the loop, whose thread owns ``pending`` (the
    notifications not yet sent; :meth:`flush` waits for them before the call's result goes).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 send: Callable[[float, float | None, str], Coroutine[Any, Any, None]]) -> None:
        self._loop = loop
        self._send = send
        self._lock = threading.Lock()
        self._count = 0
        self.pending: list[asyncio.Task[None]] = []

    def report(self, message: str, fraction: float | None) -> None:
        """Notify the client (from any thread)."""
        with self._lock:
            self._count += 1
            count = self._count
        progress, total = (float(count), None) if fraction is None else (fraction, 1.0)
        self._loop.call_soon_threadsafe(self._start, progress, total, message)

    def heartbeat(self) -> None:
        """A heartbeat keeps the call alive here; the client is told nothing."""

    def _start(self, progress: float, total: float | None, message: str) -> None:
        self.pending.append(self._loop.create_task(self._send(progress, total, message)))

    async def flush(self) -> None:
        """Wait until every notification handed over so far was sent (or failed: a client
        that went away gets none)."""
        await asyncio.gather(*self.pending, return_exceptions=True)


def progress_callback(report: ReportProgress) -> ProgressFnT:
    """The ``progress_callback`` of one ``tools/call``: each notification becomes a report of
    the call that made it."""

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        fraction = None if not total or total <= 0 else min(max(progress / total, 0.0), 1.0)
        report(message if message is not None else _said(progress, total), fraction)

    return on_progress


def _said(progress: float, total: float | None) -> str:
    """What a notification without a message says: ``3`` or ``3 of 4``."""
    return f"{progress:g}" if not total else f"{progress:g} of {total:g}"


def token_of(meta: Any) -> Any:
    """The progress token a request's ``_meta`` carries, or ``None``."""
    if not isinstance(meta, dict):
        return None
    return meta.get("progress_token", meta.get("progressToken"))
