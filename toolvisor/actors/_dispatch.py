"""``ToolCallDispatcher``: a batch of tool calls, each in its own supervised ``ToolCallActor``."""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor.actors._pooled import ActorThreadPool
from toolvisor.actors._tool_call import CallReply, call_actor_class, reply_of
from toolvisor.contract import CallContext, Err, Tool, ToolCall, ToolError
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import DynamicSupervisorRef, TooManyChildrenError

_log = get_event_log("dispatcher")

BatchCall = tuple[Tool, ToolCall, CallContext | None]
"""One call of a batch: the tool (already looked up), the model's call, the context."""

SupervisorSource = DynamicSupervisorRef | Callable[[], DynamicSupervisorRef]
"""The supervisor, or a function returning its current incarnation (it has a new ref after
its own supervisor restarted it)."""


class ToolCallDispatcher:
    """Runs batches of tool calls, each in a ``ToolCallActor`` under ``supervisor``.

    ``supervisor`` is a ``DynamicSupervisorRef`` or a function returning the current one
    (read at every call: after a restart the supervisor has a new ref). Owns the thread pool
    its actors' loops (and their ``thread`` handlers) run on, closed by :meth:`close`; the
    supervisor and the runner belong to the caller. Safe to use from several threads at once.
    """

    def __init__(
        self,
        supervisor: SupervisorSource,
        runner: ToolRunner,
        *,
        max_actor_threads: int = 1024,
        idle_timeout: float = 30.0,
    ) -> None:
        if not isinstance(supervisor, DynamicSupervisorRef) and not callable(supervisor):
            raise TypeError(
                "supervisor must be a DynamicSupervisorRef (from DynamicSupervisor.start()) "
                f"or a function returning the current one, got {supervisor!r}")
        if not isinstance(runner, ToolRunner):
            raise TypeError(f"runner must be a ToolRunner, got {type(runner).__name__}")
        self._supervisor = supervisor
        self._runner = runner
        self._pool = ActorThreadPool(max_threads=max_actor_threads, idle_timeout=idle_timeout)

    def dispatch(
        self,
        calls: Sequence[BatchCall],
        on_outcome: Callable[[CallReply], None] | None = None,
    ) -> list[CallReply]:
        """Run ``calls`` concurrently; return their outcomes in call order.

        ``on_outcome`` (if given) is called in this thread as each call finishes, in finishing
        order, for streaming. A call whose actor cannot be started (the supervisor is full or
        stopped) ends as ``Err(ToolError("handler_exit", code="not_started"))``.
        """
        finished: queue.SimpleQueue[tuple[int, CallReply]] = queue.SimpleQueue()
        for index, (tool, call, ctx) in enumerate(calls):
            self.start_call(tool, call, ctx, functools.partial(_put, finished, index))
        outcomes: list[CallReply | None] = [None] * len(calls)
        for _ in calls:
            index, outcome = finished.get()
            outcomes[index] = outcome
            if on_outcome is not None:
                on_outcome(outcome)
        return [o for o in outcomes if o is not None]

    def start_call(
        self,
        tool: Tool,
        call: ToolCall,
        ctx: CallContext | None,
        reply_to: Callable[[CallReply], None],
        *,
        supervisor: DynamicSupervisorRef | None = None,
    ) -> ActorRef[Any] | None:
        """Start one call in its own ``ToolCallActor``; ``reply_to(outcome)`` is called once,
        on an actor's or a runner's thread (or here, if the actor cannot be started): keep it
        quick (a parked call replies on one of the pool's few brief threads). What
        ``reply_to`` raises (``pykka.ActorDeadError``: the asker died) is logged, not raised.
        ``supervisor`` (if given) supervises the actor instead of the dispatcher's own (a
        run's background processes have their own).

        Returns the call's actor (stopping it cancels the call: its ``ctx.cancelled`` is set
        and it replies ``handler_exit`` with code ``cancelled``), or ``None`` if it could not
        be started."""
        try:
            supervisor = supervisor or self._current_supervisor()
            actor_class = call_actor_class(tool)
            return supervisor.start_child(lambda: actor_class.start(
                runner=self._runner, tool=tool, call=call, ctx=ctx, reply_to=reply_to,
                thread_pool=self._pool,
            ))
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, TooManyChildrenError):  # say which setting the user holds
                why += (" (the calls' supervisor holds Limits.concurrent_calls of the Agent, or "
                        "max_concurrent_calls of the adapter or MCP server that runs them: "
                        "raise it to run more at once)")
            outcome = reply_of(call, tool.name, Err(ToolError(
                "handler_exit",
                f"tool error ({tool.name}): handler_exit: the call's actor could not be "
                f"started: {why}",
                tool_name=tool.name, tool_call_id=call.id, cause=repr(exc), code="not_started",
            )))
            _log.info("call_not_started", tool_name=tool.name, tool_call_id=call.id,
                      error=why)
            try:
                reply_to(outcome)
            except ActorDeadError as dead:
                _log.info("reply_undeliverable", tool_name=tool.name, tool_call_id=call.id,
                          error=repr(dead))
            return None

    def _current_supervisor(self) -> DynamicSupervisorRef:
        source = self._supervisor
        if isinstance(source, DynamicSupervisorRef):
            return source
        current = source()
        if not isinstance(current, DynamicSupervisorRef):
            raise TypeError(f"the supervisor function returned {current!r}, not a "
                            "DynamicSupervisorRef")
        return current

    @property
    def thread_pool(self) -> ActorThreadPool:
        """The pool the call actors run on (``live_threads``, ``threads_abandoned``,
        ``threads_hung``)."""
        return self._pool

    def close(self, grace: float = 1.0) -> None:
        """Stop the actors' threads (stop the supervisor first, or let the batches finish).

        Threads given up at a deadline or cancel get ``grace`` seconds to return from their
        handler; the rest are logged (``threads_left_hung``) and left to exit on their own.
        """
        self._pool.close(grace)

    def __enter__(self) -> ToolCallDispatcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _put(finished: queue.SimpleQueue[tuple[int, CallReply]], index: int,
         outcome: CallReply) -> None:
    finished.put((index, outcome))
