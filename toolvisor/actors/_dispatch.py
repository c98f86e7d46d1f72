"""``ToolCallDispatcher``: a batch of tool calls, each in its own supervised ``ToolCallActor``."""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable, Sequence
from types import TracebackType

from toolvisor.actors._pooled import ActorThreadPool
from toolvisor.actors._tool_call import CallOutcome, ToolCallActor, outcome_of
from toolvisor.contract import CallContext, Err, Tool, ToolCall, ToolError
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import ToolCallSupervisorRef

BatchCall = tuple[Tool, ToolCall, CallContext | None]
"""One call of a batch: the tool (already looked up), the model's call, the context."""

SupervisorSource = ToolCallSupervisorRef | Callable[[], ToolCallSupervisorRef]
"""The supervisor, or a function returning its current incarnation (it has a new ref after
its own supervisor restarted it)."""


class ToolCallDispatcher:
    """Runs batches of tool calls, each in a ``ToolCallActor`` under ``supervisor``.

    Owns the thread pool its actors' loops run on (closed by :meth:`close`); the supervisor
    and the runner belong to the caller. Safe to use from several threads at once.
    """

    def __init__(
        self,
        supervisor: SupervisorSource,
        runner: ToolRunner,
        *,
        max_actor_threads: int = 1024,
        idle_timeout: float = 30.0,
    ) -> None:
        self._supervisor = supervisor
        self._runner = runner
        self._pool = ActorThreadPool(max_threads=max_actor_threads, idle_timeout=idle_timeout)

    def dispatch(
        self,
        calls: Sequence[BatchCall],
        on_outcome: Callable[[CallOutcome], None] | None = None,
    ) -> list[CallOutcome]:
        """Run ``calls`` concurrently; return their outcomes in call order.

        ``on_outcome`` (if given) is called in this thread as each call finishes, in finishing
        order, for streaming. A call whose actor cannot be started (the supervisor is full or
        stopped) ends as ``Err(ToolError("handler_exit", code="not_started"))``.
        """
        finished: queue.SimpleQueue[tuple[int, CallOutcome]] = queue.SimpleQueue()
        for index, (tool, call, ctx) in enumerate(calls):
            self.start_call(tool, call, ctx, functools.partial(_put, finished, index))
        outcomes: list[CallOutcome | None] = [None] * len(calls)
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
        reply_to: Callable[[CallOutcome], None],
    ) -> None:
        """Start one call in its own ``ToolCallActor``; ``reply_to(outcome)`` is called once,
        on an actor's thread (or here, if the actor cannot be started)."""
        try:
            supervisor = (self._supervisor if isinstance(self._supervisor, ToolCallSupervisorRef)
                          else self._supervisor())
            supervisor.start_child(lambda: ToolCallActor.start(
                runner=self._runner, tool=tool, call=call, ctx=ctx, reply_to=reply_to,
                thread_pool=self._pool,
            ))
        except Exception as exc:
            reply_to(outcome_of(call, tool.name, Err(ToolError(
                "handler_exit",
                f"tool error ({tool.name}): handler_exit: the call's actor could not be "
                f"started: {type(exc).__name__}: {exc}",
                tool_name=tool.name, tool_call_id=call.id, cause=repr(exc), code="not_started",
            ))))

    def close(self) -> None:
        """Stop the actors' threads (stop the supervisor first, or let the batches finish)."""
        self._pool.close()

    def __enter__(self) -> ToolCallDispatcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _put(finished: queue.SimpleQueue[tuple[int, CallOutcome]], index: int,
         outcome: CallOutcome) -> None:
    finished.put((index, outcome))
