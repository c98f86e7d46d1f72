"""``ToolCallActor``: one supervised actor per tool call, replying exactly once."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykka import ActorDeadError

from toolvisor._logging import get_event_log
from toolvisor.actors._pooled import ActorThreadPool, PooledThreadingActor
from toolvisor.contract import CallContext, Err, HandlerResult, Tool, ToolCall, ToolError
from toolvisor.executor import CallHandle, ToolRunner, encode_checked
from toolvisor.supervisors import SupervisedActor

_RESULT_WAIT = 5.0  # seconds to wait for a result the runner has claimed but not yet handed over


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one tool call ended: its ids, the handler result and the text the model reads.

    ``result`` is what ``encode_checked`` returned (an unencodable result has become
    ``Err(ToolError("encoding_failed"))``), ``text`` its encoding.
    """

    tool_call_id: str
    tool_name: str
    result: HandlerResult
    text: str

    @property
    def is_error(self) -> bool:
        """Whether the call failed (a reported ``Err`` or a ``ToolError``)."""
        return isinstance(self.result, Err)


@dataclass(frozen=True, slots=True)
class _Finished:
    """The runner's result for this actor's call (told by a runner thread)."""

    result: HandlerResult


def outcome_of(call: ToolCall, tool_name: str, result: HandlerResult) -> CallOutcome:
    """The outcome of ``call`` with ``result``, encoded for the model."""
    checked, text = encode_checked(result, tool_name=tool_name, tool_call_id=call.id)
    return CallOutcome(call.id, tool_name, checked, text)


class ToolCallActor(SupervisedActor, PooledThreadingActor):
    """Runs one tool call through a :class:`ToolRunner` and replies once with a CallOutcome.

    Life: ``on_start`` starts the call on the runner; the runner's result comes back as a
    message; the actor calls ``reply_to(outcome)`` and stops. Stopped before that (its
    supervisor shutting down), it cancels the call and replies with the cancelled result. A
    result arriving after the reply is discarded and logged (``late_result_discarded``).

    State: ``_replied`` and ``_handle`` belong to the actor's thread; ``_result`` is written
    once by the runner thread that delivers the result, before ``_result_ready`` is set.
    Events (component ``tool_call``, bound ``tool_name`` and ``tool_call_id``):
    ``call_started``, ``call_completed``, ``call_timed_out``, ``call_abandoned``.
    """

    def __init__(
        self,
        *,
        runner: ToolRunner,
        tool: Tool,
        call: ToolCall,
        ctx: CallContext | None,
        reply_to: Callable[[CallOutcome], None],
        thread_pool: ActorThreadPool,
    ) -> None:
        super().__init__(thread_pool=thread_pool)
        self._runner = runner
        self._tool = tool
        self._call = call
        if ctx is None:
            ctx = CallContext(tool_call=call)
        elif ctx.tool_call is None:
            ctx = dataclasses.replace(ctx, tool_call=call)
        self._ctx = ctx
        self._reply_to = reply_to
        self._log = get_event_log("tool_call", tool_name=tool.name, tool_call_id=call.id)
        self._handle: CallHandle | None = None
        self._replied = False
        self._result: HandlerResult | None = None
        self._result_ready = threading.Event()

    def on_start(self) -> None:
        self._log.debug("call_started", isolation=self._tool.isolation)
        try:
            self._handle = self._runner.start(self._tool, self._call.arguments, self._ctx,
                                              self._on_done)
        except Exception as exc:
            self._reply(Err(ToolError(
                "handler_exit",
                f"tool error ({self._tool.name}): handler_exit: the call could not be "
                f"started: {type(exc).__name__}: {exc}",
                tool_name=self._tool.name, tool_call_id=self._call.id, cause=repr(exc),
                code="not_started",
            )))
            self.stop()

    def _on_done(self, result: HandlerResult) -> None:
        """The runner's callback, on a runner thread: hand the result to the actor."""
        self._result = result
        self._result_ready.set()
        try:
            self.actor_ref.tell(_Finished(result))
        except ActorDeadError:  # the actor replied (cancelled) and stopped meanwhile
            self._log.info("late_result_discarded", result_type=type(result).__name__)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Finished):
            self._reply(message.result)
            self.stop()
            return None
        return super().on_receive(message)

    def _reply(self, result: HandlerResult) -> None:
        if self._replied:
            self._log.info("late_result_discarded", result_type=type(result).__name__)
            return
        self._replied = True
        outcome = outcome_of(self._call, self._tool.name, result)
        if isinstance(result, Err) and isinstance(result.reason, ToolError) \
                and result.reason.reason == "timeout":
            self._log.warning("call_timed_out", timeout=result.reason.cause)
        else:
            self._log.debug("call_completed", result_type=type(outcome.result).__name__,
                            is_error=outcome.is_error)
        self._reply_to(outcome)

    def _finish_early(self) -> None:
        """Stopping before the runner's result was handled: cancel the call, reply with the
        result the runner delivered (the cancelled one, unless the real one won the race)."""
        if self._replied:
            return
        if self._handle is not None:
            self._handle.cancel()
        if self._result_ready.wait(_RESULT_WAIT) and self._result is not None:
            self._reply(self._result)

    def on_stop(self) -> None:
        self._finish_early()

    def on_failure(self, *exc_info: Any) -> None:
        self._finish_early()

    def on_abandon(self) -> None:
        """Runs in the supervisor's thread when it gives up waiting for this actor."""
        if self._handle is not None:
            with contextlib.suppress(Exception):
                self._handle.cancel()
        self._log.warning("call_abandoned")
