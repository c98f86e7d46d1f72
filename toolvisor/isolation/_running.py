"""``RunningCall``: one call inside a ``ToolRunner``, settled exactly once, as a backend sees it.

Exactly once: the call is settled by whoever first takes its claim (the one item of a dict,
popped atomically and never put back): the handler's thread, the deadline timer or a canceller.
A late result finds the claim gone and is discarded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from toolvisor.contract import CallContext, Err, HandlerResult, Tool, ToolError


class Cancellable(Protocol):
    """What the runner arms for a call (its deadline): it can be called off."""

    def cancel(self) -> None: ...


class RunningCall:
    """One call from ``ToolRunner.start`` until its result is delivered.

    Settled exactly once: :meth:`claim` acquires a lock without blocking and never releases
    it, so whichever thread claims first (the handler's, the timer's, a canceller's) is the one
    that delivers. ``lock`` guards ``worker``: what runs the handler right now (a pool thread,
    a worker process, an asyncio task, the caller's own thread), written by the backend and
    read by whoever claimed the call to stop it. ``deadline`` is written once when the backend
    arms the call as its handler starts, ``idle`` (what watches its signs of life, see the
    executor's ``Liveness``) once at admission; ``stop`` (the backend's way to stop the
    handler) once by the runner before it submits. ``here`` (a call started with
    ``start_here``: what runs its handler on the caller's thread) is written by the runner and
    taken once by the caller.
    """

    __slots__ = (
        "_unclaimed", "arguments", "ctx", "deadline", "here", "idle", "lock", "on_done", "stop",
        "timeout", "token", "tool", "worker",
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
        self.deadline: Cancellable | None = None
        self.idle: Cancellable | None = None
        self.stop: Callable[[RunningCall], None] | None = None
        self.here: Callable[[], None] | None = None
        self._unclaimed = {0: None}  # popped by the one claim (a dict's pop is atomic; a dict
        # of atoms, unlike a lock, is no object the collector tracks while the call waits)

    def claim(self) -> bool:
        """``True`` for the first caller only: that caller delivers the result."""
        try:
            self._unclaimed.popitem()
        except KeyError:
            return False
        return True

    @property
    def settled(self) -> bool:
        """Whether a result has been claimed (delivered or about to be)."""
        return not self._unclaimed

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

    def idle_timeout_error(self, seconds: float) -> Err:
        """The result of a call that showed no sign of life (no progress report, no heartbeat)
        for its tool's ``idle_timeout``: ``timeout``, code ``idle_timeout``; ``cause`` is the
        idle timeout (seconds)."""
        return self.error("timeout", f"no progress or heartbeat for {seconds:g} s", seconds,
                          code="idle_timeout")

    def cancelled_error(self) -> Err:
        """The result of a call cancelled before it finished: ``handler_exit``, code
        ``cancelled`` (the runtime shut the call down, as OTP's ``shutdown`` exit)."""
        return self.error("handler_exit", "the call was cancelled", "cancelled", code="cancelled")
