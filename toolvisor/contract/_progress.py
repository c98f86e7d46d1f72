"""Signs of life from a running handler: progress reports and heartbeats (``ctx.report_progress``,
``ctx.heartbeat``), and the check every report passes wherever it is made.

The contract declares only the capability (``ProgressSink``) and the check; the runner puts a
sink into each call's context (it also keeps the call's idle deadline), and the host or the MCP
server behind it says where reports go (``on_progress``, the live view, the call's span, an MCP
client's ``notifications/progress``). The model sees none of it.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable


@runtime_checkable
class ProgressSink(Protocol):
    """Where a call's progress and heartbeats go (the call context's ``progress``).

    ``report`` gets a checked report (see :func:`check_progress`); ``heartbeat`` says only
    that the handler is alive. Both are called on whichever thread the handler reports from.
    """

    def report(self, message: str, fraction: float | None) -> None: ...

    def heartbeat(self) -> None: ...


def check_progress(message: object, fraction: object) -> float | None:
    """Refuse a report whose ``message`` is no ``str`` or whose ``fraction`` is neither
    ``None`` nor a number in [0, 1]; the fraction as a float (or ``None``)."""
    if not isinstance(message, str):
        raise TypeError(f"report_progress: message must be a str, got "
                        f"{type(message).__name__} {message!r}")
    if fraction is None:
        return None
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) \
            or not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise ValueError(f"report_progress: fraction must be None or a number from 0 to 1 "
                         f"(the share of the work done), got {fraction!r}")
    return float(fraction)
