"""``ToolCallActor``: one supervised actor per tool call, replying exactly once, in two kinds.

An ``InlineCallActor`` runs the handler on its own pooled thread (``thread`` tools); a
``ParkedCallActor`` starts the call elsewhere and parks, holding no thread, until the result
comes back as a message (``process``, ``asyncio``, ``ray``). ``call_actor_class`` picks one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykka import ActorDeadError, ActorRegistry
from pykka.messages import _ActorStop

from toolvisor._logging import get_event_log
from toolvisor._one_shot import OneShotEvent
from toolvisor.actors._pooled import ActorThreadPool, ParkingMailbox, PooledThreadingActor
from toolvisor.call import encode_checked
from toolvisor.contract import (
    CallContext,
    Err,
    HandlerResult,
    Tool,
    ToolCall,
    ToolError,
    result_outcome,
)
from toolvisor.executor import CallHandle, ToolRunner
from toolvisor.supervisors import ShutdownRequest, SupervisedActor

_QUIET_OUTCOMES = frozenset({"ok", "ask_user", "halt", "pending"})  # logged at info
_RESULT_WAIT = 5.0  # seconds to wait for a result the runner has claimed but not yet handed over


@dataclass(frozen=True, slots=True)
class CallReply:
    """What a ``ToolCallActor`` replies with: the call's ids, the handler result and the text
    the model reads (the machine's own ``CallOutcome`` adds the call's state writes).

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


def reply_of(call: ToolCall, tool_name: str, result: HandlerResult) -> CallReply:
    """The reply for ``call`` with ``result``, encoded for the model."""
    checked, text = encode_checked(result, tool_name=tool_name, tool_call_id=call.id)
    return CallReply(call.id, tool_name, checked, text)


def _ended(shutdown: bool) -> bool:
    """A stop request to a call actor whose loop has ended: the mail is kept unread."""
    return False


class _CallInbox(ParkingMailbox):
    """A mailbox that lets a stop or shutdown request act at once while the handler runs on
    the actor's own thread (the loop cannot read its mail then). ``on_stop_request`` is set
    once by the actor's constructor; it runs on the sender's thread and returns whether the
    actor ended there (the request then needs no delivery). Once the actor's loop has ended,
    it is :func:`_ended` (the actor's own would keep the actor in a cycle with its mailbox)."""

    __slots__ = ("on_stop_request",)

    on_stop_request: Callable[[bool], bool]

    def close(self) -> None:
        super().close()
        self.on_stop_request = _ended

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, ShutdownRequest | _ActorStop) \
                and self.on_stop_request(isinstance(message, ShutdownRequest)):
            if item.reply_to is not None:  # ActorRef.stop(block=True) waits for this
                item.reply_to.set(None)
            return
        super().put(item)


class ToolCallActor(SupervisedActor, PooledThreadingActor):
    """Runs one tool call through a :class:`ToolRunner` and replies once with a ``CallReply``:
    what both kinds share (starting the call, the one reply, its events). Start one of its
    two kinds, as ``call_actor_class(tool)`` picks.

    ``reply_to`` may raise (e.g. ``pykka.ActorDeadError``: whoever asked has died): that is
    logged (``reply_undeliverable`` / ``reply_failed``), never a crash of this actor.

    State: ``_handle`` is written once by the actor's thread. "The actor's thread" is
    whichever pool thread runs its loop's current slice (one at a time). Events (component
    ``tool_call``, bound ``run_id``, ``turn``, ``tool_name``, ``tool_call_id``, ``attempt``,
    ``isolation``): ``call_started``, ``call_finished`` (``outcome``, ``duration_ms``),
    ``call_abandoned``.
    """

    def __init__(
        self,
        *,
        runner: ToolRunner,
        tool: Tool,
        call: ToolCall,
        ctx: CallContext | None,
        reply_to: Callable[[CallReply], None],
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
        self._log = get_event_log("tool_call", run_id=ctx.session_id, turn=ctx.turn,
                                  tool_name=tool.name, tool_call_id=call.id,
                                  attempt=ctx.attempt, isolation=tool.isolation)
        self._started = 0.0
        self._handle: CallHandle | None = None
        self._replied = False

    def on_start(self) -> None:
        self._started = time.monotonic()
        self._log.info("call_started")
        try:
            handle = self._start_call()
        except Exception as exc:
            self._reply(Err(ToolError(
                "handler_exit",
                f"tool error ({self._tool.name}): handler_exit: the call could not be "
                f"started: {type(exc).__name__}: {exc}",
                tool_name=self._tool.name, tool_call_id=self._call.id, cause=repr(exc),
                code="not_started",
            )))
            self._stop()
            return
        self._handle = handle
        self._call_started(handle)

    def _start_call(self) -> CallHandle:
        """Start the call on the runner (on the actor's thread); what raises is ``not_started``."""
        raise NotImplementedError

    def _call_started(self, handle: CallHandle) -> None:
        """What the actor does once the call has started (on the actor's thread)."""
        raise NotImplementedError

    def _reply(self, result: HandlerResult) -> None:
        """Encode and send the outcome; once per call (an inline call: on whichever thread the
        runner delivers on; a parked one: on the actor's thread)."""
        if self._replied:
            self._log.info("late_result_discarded", result_type=type(result).__name__)
            return
        self._replied = True
        outcome = reply_of(self._call, self._tool.name, result)
        if self._log.enabled:
            self._log_finished(outcome.result)
        try:
            self._reply_to(outcome)
        except ActorDeadError as exc:
            self._log.info("reply_undeliverable", error=repr(exc))
        except Exception as exc:
            self._log.error("reply_failed", error=f"{type(exc).__name__}: {exc}")

    def _log_finished(self, result: HandlerResult) -> None:
        """``call_finished``: the outcome word, the duration, and what went wrong if it did."""
        word = result_outcome(result)
        duration_ms = round((time.monotonic() - self._started) * 1000, 3)
        if word in _QUIET_OUTCOMES:
            self._log.info("call_finished", outcome=word, duration_ms=duration_ms)
            return
        reason = result.reason if isinstance(result, Err) else result
        error = reason.message if isinstance(reason, ToolError) else str(reason)
        self._log.warning("call_finished", outcome=word, duration_ms=duration_ms,
                          error=error[:500])

    def on_abandon(self) -> None:
        """Runs in the supervisor's thread when it gives up waiting for this actor."""
        if self._handle is not None:
            with contextlib.suppress(Exception):
                self._handle.cancel()
        self._log.warning("call_abandoned")


class InlineCallActor(ToolCallActor):
    """A call whose handler runs on this actor's own pooled thread (``thread`` tools, the
    common case; ``ToolRunner.start_here``): ``on_start`` runs the handler, replies and stops
    the actor.

    The runner still owns the timeout: at the deadline its timer thread replies ``timeout``,
    sets the token and gives this actor up (:meth:`_give_up`): the pool thread is abandoned
    and the actor ends at once (unregistered, its supervisor told), while the handler may
    still be running; what it returns later is discarded and logged. A stop or shutdown
    request arriving while the handler runs cancels the call from the requester's thread
    (same give-up; see :class:`_CallInbox`). Exactly one reply: the runner's claim picks the
    one result.

    State: ``_given_up`` is written only under the call's lock by the thread that claims the
    call while the handler runs (read by the actor's thread after ``run_here`` returns);
    ``_stop_pending`` by a stop requester (read by the actor's thread once ``_handle`` is
    set).
    """

    def __init__(
        self,
        *,
        runner: ToolRunner,
        tool: Tool,
        call: ToolCall,
        ctx: CallContext | None,
        reply_to: Callable[[CallReply], None],
        thread_pool: ActorThreadPool,
    ) -> None:
        super().__init__(runner=runner, tool=tool, call=call, ctx=ctx, reply_to=reply_to,
                         thread_pool=thread_pool)
        self._given_up = False
        self._stop_pending = False
        inbox = self.actor_inbox
        assert isinstance(inbox, _CallInbox)
        inbox.on_stop_request = self._stop_requested

    @staticmethod
    def _create_actor_inbox() -> Any:
        return _CallInbox()

    def _start_call(self) -> CallHandle:
        return self._runner.start_here(self._tool, self._call.arguments, self._ctx,
                                       self._reply, self._give_up)

    def _call_started(self, handle: CallHandle) -> None:
        if self._stop_pending:  # a stop request came before the handle existed
            handle.cancel()
        scope = self._ctx.trace_scope
        if scope is None:
            handle.run_here()
        else:
            with scope():
                handle.run_here()
        if not self._given_up:
            self._stop()

    def _give_up(self) -> None:
        """The runner abandons this actor's thread (stuck in the handler): end the actor now.

        Runs on the thread that claimed the call (the timer's at the deadline, a stop
        requester's, the supervisor's on abandon) while it holds the call's lock.
        """
        self._given_up = True
        self.abandon_thread()
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        # Answer pending asks now, as the loop's teardown would. The actor's thread cannot
        # drain the mailbox meanwhile: it needs the call's lock, held here, to get past the
        # handler.
        self._actor_loop_teardown()
        self._report_exit()

    def _stop_requested(self, shutdown: bool) -> bool:
        """On the requester's thread: cancel the call whose handler runs on this actor's
        thread; ``True`` if that ended the actor (see :class:`_CallInbox`)."""
        if shutdown:
            self._record_exit_reason("shutdown")
        self._stop_pending = True
        handle = self._handle
        if handle is None:
            return False
        handle.cancel()
        return self._given_up


class ParkedCallActor(ToolCallActor):
    """A call that runs elsewhere (``process``, ``asyncio`` and ``ray`` tools): ``on_start``
    starts it on the runner and the actor parks (it holds no thread while the call waits);
    the result comes back as a message; the actor replies and stops. Stopped before that (its
    supervisor shutting down), it cancels the call and replies with the cancelled result.

    State: ``_replied`` belongs to the actor's thread; ``_result`` is written once by the
    runner thread that delivers it, before ``_result_ready`` is set.

    Its slices never block (they start the call, or reply and stop), so they run on the
    pool's brief threads (``brief_slices``).
    """

    brief_slices = True

    def __init__(
        self,
        *,
        runner: ToolRunner,
        tool: Tool,
        call: ToolCall,
        ctx: CallContext | None,
        reply_to: Callable[[CallReply], None],
        thread_pool: ActorThreadPool,
    ) -> None:
        super().__init__(runner=runner, tool=tool, call=call, ctx=ctx, reply_to=reply_to,
                         thread_pool=thread_pool)
        self._result: HandlerResult | None = None
        self._result_ready: OneShotEvent | None = None

    def _start_call(self) -> CallHandle:
        self._result_ready = OneShotEvent()
        return self._runner.start(self._tool, self._call.arguments, self._ctx, self._on_done)

    def _call_started(self, handle: CallHandle) -> None:
        """Nothing to do: the actor parks until the runner's result arrives."""

    def _on_done(self, result: HandlerResult) -> None:
        """The runner's callback, on a runner thread: hand the result to the actor."""
        self._result = result
        assert self._result_ready is not None
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

    def _finish_early(self) -> None:
        """Stopping before the runner's result was handled: cancel the call, reply with the
        result the runner delivered (the cancelled one, unless the real one won the race)."""
        if self._replied:
            return
        if self._handle is not None:
            self._handle.cancel()
        ready = self._result_ready
        if ready is not None and ready.wait(_RESULT_WAIT) and self._result is not None:
            self._reply(self._result)

    def on_stop(self) -> None:
        self._finish_early()

    def on_failure(self, *exc_info: Any) -> None:
        self._finish_early()


def call_actor_class(tool: Tool) -> type[ToolCallActor]:
    """The kind of actor that runs ``tool``'s calls: inline when the runner runs its handler
    on the calling thread (``ToolRunner.runs_here``), else parked."""
    return InlineCallActor if ToolRunner.runs_here(tool) else ParkedCallActor
