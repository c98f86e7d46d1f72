"""``RunningCall``: one call inside a ``ToolRunner``, settled exactly once; ``CallHandle``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from toolvisor.contract import CallContext, Err, HandlerResult, Tool, ToolError
from toolvisor.executor._deadlines import Deadline


class RunningCall:
    """One call from ``ToolRunner.start`` until its result is delivered.

    Settled exactly once: :meth:`claim` acquires a lock without blocking and never releases
    it, so whichever thread claims first (the handler's, the timer's, a canceller's) is the one
    that delivers. ``lock`` guards ``worker``: what runs the handler right now (a pool thread,
    a worker process, an asyncio task, the caller's own thread), written by the isolation and
    read by whoever claimed the call to stop it. ``deadline`` is written once by the isolation
    when the handler starts; ``stop`` (the isolation's way to stop the handler) once by the
    runner before it submits. ``here`` (a call started with ``start_here``: what runs its
    handler on the caller's thread) is written by the runner and taken once by the caller.
    """

    __slots__ = (
        "_once", "arguments", "ctx", "deadline", "here", "lock", "on_done", "stop", "timeout",
        "token", "tool", "worker",
    )

    def __init__(
        self,
        tool: Tool,
        arguments: Any,
        ctx: CallContext,
        *,
        token: threading.Event,
        timeout: float,
        on_done: Callable[[HandlerResult], None],
    ) -> None:
        self.tool = tool
        self.arguments = arguments
        self.ctx = ctx
        self.token = token
        self.timeout = timeout
        self.on_done = on_done
        self.lock = threading.Lock()
        self.worker: Any = None
        self.deadline: Deadline | None = None
        self.stop: Callable[[RunningCall], None] | None = None
        self.here: Callable[[], None] | None = None
        self._once = threading.Lock()

    def claim(self) -> bool:
        """``True`` for the first caller only: that caller delivers the result."""
        return self._once.acquire(blocking=False)

    @property
    def settled(self) -> bool:
        """Whether a result has been claimed (delivered or about to be)."""
        return self._once.locked()

    def error(self, reason: Any, detail: str, cause: Any, code: str | None = None) -> Err:
        """``Err(ToolError(reason))`` naming this call's tool and call id."""
        return Err(ToolError(
            reason,
            f"tool error ({self.tool.name}): {reason}: {detail}",
            tool_name=self.tool.name,
            tool_call_id=self.ctx.tool_call_id,
            cause=cause,
            code=code,
        ))

    def log_fields(self) -> dict[str, Any]:
        """The ids every event about this call carries."""
        ctx = self.ctx
        return {"run_id": ctx.session_id, "turn": ctx.turn, "tool_name": self.tool.name,
                "tool_call_id": ctx.tool_call_id, "attempt": ctx.attempt,
                "isolation": self.tool.isolation}

    def timeout_error(self) -> Err:
        """The result of a call that ran past its timeout; ``cause`` is the timeout (seconds)."""
        return self.error("timeout", f"no result within {self.timeout:g} s", self.timeout)

    def cancelled_error(self) -> Err:
        """The result of a call cancelled before it finished: ``handler_exit``, code
        ``cancelled`` (the runtime shut the call down, as OTP's ``shutdown`` exit)."""
        return self.error("handler_exit", "the call was cancelled", "cancelled", code="cancelled")


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
