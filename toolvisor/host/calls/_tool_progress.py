"""``ToolProgress``: where a call's ``ctx.report_progress`` goes in a run.

The host gives each call attempt one (the runner's ``Liveness`` passes reports on to it): a
report is an event on the call's ``execute_tool`` span at once, on the reporting thread (a
span is thread-safe), and a ``ToolProgressed`` message to the orchestrator, whose thread logs
it (``tool_progress``, which the live view reads) and tells the run's ``on_progress`` the
progress event ``tool_progress``, while the run is hosted. The model never sees it.
"""

from __future__ import annotations

from collections.abc import Callable

from toolvisor.host._protocol import ToolProgressed
from toolvisor.host.observe import ToolSpan
from toolvisor.machine import CallToRun


class ToolProgress:
    """The host's progress sink of one call attempt; safe from any thread (it keeps nothing
    that changes). ``tell`` is given each report as a ``ToolProgressed`` (the orchestrator's
    is a ``tell`` of its ``ActorRef``)."""

    __slots__ = ("_fields", "_run_id", "_span", "_tell")

    def __init__(self, tell: Callable[[ToolProgressed], None], run_id: str, planned: CallToRun,
                 tool_name: str, span: ToolSpan | None) -> None:
        self._tell = tell
        self._run_id = run_id
        self._span = span
        self._fields = {"turn": planned.turn, "tool_name": tool_name,
                        "tool_call_id": planned.call.id, "attempt": planned.attempt}

    def report(self, message: str, fraction: float | None) -> None:
        """Put the report on the call's span and tell the orchestrator."""
        if self._span is not None:
            self._span.progress(message, fraction)
        self._tell(ToolProgressed(self._run_id, {**self._fields, "message": message,
                                                 "fraction": fraction}))

    def heartbeat(self) -> None:
        """A heartbeat only keeps the call alive (the runner's business): nothing to tell."""
