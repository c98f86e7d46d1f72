"""``CallHandle``: the caller's handle on one call a ``ToolRunner`` started."""

from __future__ import annotations

from collections.abc import Callable

from toolvisor.isolation import RunningCall


class CallHandle:
    """The caller's handle on one started call."""

    __slots__ = ("_call", "_cancel")

    def __init__(self, call: RunningCall, cancel: Callable[[RunningCall], bool]) -> None:
        self._call = call
        self._cancel = cancel

    @property
    def tool_name(self) -> str:
        return self._call.tool.name

    @property
    def tool_call_id(self) -> str | None:
        return self._call.ctx.tool_call_id

    @property
    def runs_here(self) -> bool:
        """Whether the handler waits for :meth:`run_here` (``ToolRunner.start_here``)."""
        return self._call.here is not None

    def run_here(self) -> None:
        """Run the handler now, on this thread, if ``ToolRunner.start_here`` left it to the
        caller (otherwise do nothing). Returns when the handler returns; the result went to
        ``on_done`` unless the deadline or a cancel delivered first. Call it once, from the
        thread that started the call."""
        run, self._call.here = self._call.here, None
        if run is not None:
            run()

    @property
    def done(self) -> bool:
        """Whether the call's result has been delivered (or is being delivered)."""
        return self._call.settled

    def cancel(self) -> bool:
        """Stop the call now: ``True`` if it was still running.

        The call's token is set, its thread abandoned, its worker process killed or its task
        cancelled, and ``on_done`` receives ``Err(ToolError("handler_exit", code="cancelled",
        cause="cancelled"))``. ``False`` if the result was already delivered.
        """
        return self._cancel(self._call)
