"""``ToolRunner``: run handlers under a timeout, each in the isolation backend its tool names.

The runner uses no actors: it is the isolation mechanism (run this handler there, with this
deadline, and call back exactly once), while the actor layer owns the call itself
(``ToolCallActor``). A call's timeout counts from when its handler starts: waiting for a free
thread or worker does not count. It has no branch per isolation: each backend registers.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor._one_shot import OneShotEvent
from toolvisor.call import not_found
from toolvisor.contract import CallContext, HandlerResult, Tool, check_seconds
from toolvisor.executor._calls import CallHandle
from toolvisor.executor._deadlines import DeadlineTimer
from toolvisor.executor._liveness import Liveness
from toolvisor.executor._stats import Counters, RunnerStats
from toolvisor.isolation import (
    GiveUp,
    IsolationBackend,
    MpContext,
    RunningCall,
    Runtime,
    backend_named,
    registered_backends,
)

_log = get_event_log("tool_runner")

OnDone = Callable[[HandlerResult], None]


_KEPT_FIELDS = tuple(f.name for f in dataclasses.fields(CallContext)
                     if f.name not in ("cancelled", "progress"))


def _with_token(ctx: CallContext, token: threading.Event, progress: Liveness) -> CallContext:
    """``ctx`` with the call's own cancel token and progress sink: each field copied as it is
    (already checked when ``ctx`` was made), about half the cost of ``dataclasses.replace``,
    which goes through every field's definition and ``__init__`` (~4 us per call)."""
    copy = object.__new__(CallContext)
    put = object.__setattr__  # the context is frozen
    for name in _KEPT_FIELDS:
        put(copy, name, getattr(ctx, name))
    put(copy, "cancelled", token)
    put(copy, "progress", progress)
    return copy


def _delivered(result: HandlerResult) -> None:
    """A delivered call's ``on_done``: it is called once, then let go."""


class ToolRunner:
    """Runs tool handlers with a timeout per call, each in its tool's isolation: one backend of
    each registered isolation (``toolvisor.isolation.register_backend``) runs the handlers,
    while the runner keeps each call's deadline and settles it exactly once. The built-in ones:

    * ``thread`` (the default for sync handlers): reused threads that grow on demand up to
      ``max_threads`` busy at once (later calls wait for a thread) and retire after
      ``thread_idle_timeout`` idle seconds. At the deadline the call's thread is abandoned and
      replaced; what it returns later is discarded. With :meth:`start_here` the handler runs on
      the caller's own thread instead, which is given up at the deadline.
    * ``process``: ``process_workers`` worker processes (``mp_context``: ``forkserver`` or
      ``spawn``), supervised by the pool: at the deadline the worker is killed with SIGKILL and
      replaced; a worker that dies mid-call gives ``handler_exit``. Arguments are validated in
      this process (a bad call never costs a round trip); ``ctx.context`` and ``ctx.engine``
      stay here, the rest of the context is served to the worker (the context link).
      The workers would import the program's ``__main__`` again, so they never start while it
      runs outside ``if __name__ == "__main__":`` (``RuntimeError`` from :meth:`start`).
    * ``asyncio``: ``async def`` handlers on one event loop thread; cancelled at the deadline.
    * ``ray``: each call a Ray task (with the tool's ``options``, never retried by Ray
      unless they say so) on the cluster the program connected to, or on a local one started
      on first use and shut down at close; cancelled with ``force=True`` at the deadline.
      Arguments are validated here; the task's handler gets what a ``process`` one gets, its
      context served over a link the task opens back to this process.

    The timeout is ``tool.timeout`` or ``tool_timeout``, counted from when the handler starts
    (waiting for a free thread or worker does not count). One timer thread watches every
    deadline. Each call gets its own cancellation token (``ctx.cancelled``, a
    ``threading.Event``, one set once: a ``OneShotEvent``) set at the deadline or on cancel.

    Each call's ``ctx.progress`` is the runner's (``report_progress`` and ``heartbeat`` pass
    through it to the sink the caller's context held; a call started without a context, to a
    tool without ``idle_timeout``, has none: its reports go nowhere): a tool with
    ``idle_timeout`` that shows no sign of life for that long ends ``timeout`` with code
    ``idle_timeout``, stopped as at its deadline. ``clock`` (monotonic seconds) is the one
    the deadlines and signs of life are read on (a fake one in tests).
    """

    def __init__(
        self,
        *,
        tool_timeout: float = 30.0,
        process_workers: int = 2,
        max_threads: int = 256,
        thread_idle_timeout: float = 30.0,
        close_grace: float = 1.0,
        mp_context: MpContext = "forkserver",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_seconds("tool_timeout", tool_timeout, positive=True)
        check_seconds("thread_idle_timeout", thread_idle_timeout, positive=True)
        if isinstance(close_grace, bool) or not isinstance(close_grace, int | float) \
                or close_grace < 0:
            raise ValueError(f"close_grace must be a number of seconds >= 0, got {close_grace!r}")
        self._tool_timeout = float(tool_timeout)
        self._close_grace = float(close_grace)
        self._counters = Counters()
        self._clock = clock
        self._timer = DeadlineTimer("toolvisor-deadlines", clock)
        runtime = Runtime(arm=self._arm, settle=self._settle, settle_soon=self._settle_soon,
                          count=self._counters.add, max_threads=max_threads,
                          thread_idle_timeout=thread_idle_timeout,
                          process_workers=process_workers, mp_context=mp_context)
        self._backends: dict[str, IsolationBackend] = {
            name: backend(runtime) for name, backend in registered_backends().items()}
        self._lock = threading.Lock()  # guards _inflight and _closed
        self._all_done = threading.Condition(self._lock)
        self._inflight: set[RunningCall] = set()
        self._closed = False
        self._expire_at: Callable[[RunningCall], None] = self._expire  # every deadline's
        # callback, made once (a closure per call was ~4 objects tracked while it waited)
        self._cancel_call: Callable[[RunningCall], bool] = self._cancel  # every handle's
        self._stops: dict[IsolationBackend, Callable[[RunningCall], None]] = {
            backend: backend.stop for backend in self._backends.values()}  # each backend's
        # stop, bound once (a bound method per call was one more object kept while it ran)

    # -- starting calls ----------------------------------------------------------------------

    def start(
        self, tool: Tool, arguments: Any, ctx: CallContext | None, on_done: OnDone
    ) -> CallHandle:
        """Start one call without waiting; ``on_done(result)`` is called exactly once, on a
        runner thread (keep it quick: it delays whatever that thread does next).

        A ``process`` call that would start the worker processes while the program's
        ``__main__`` runs outside ``if __name__ == "__main__":`` raises ``RuntimeError`` here
        (a worker would run the program again)."""
        backend = self._check(tool)
        call = self._admit(tool, arguments, ctx, on_done)
        self._launch(call, backend)
        return CallHandle(call, self._cancel_call)

    def start_here(
        self, tool: Tool, arguments: Any, ctx: CallContext | None, on_done: OnDone,
        give_up: GiveUp,
    ) -> CallHandle:
        """Start one call whose handler runs on the CALLING thread, in the returned handle's
        ``run_here()``, if its backend can (``runs_here``: ``thread``); others start as with
        :meth:`start`.

        For callers that are themselves a thread per call (a ``ToolCallActor``): the handler
        runs where the caller is, saving two thread hops. The timeout is still the runner's:
        at the deadline (or on cancel) the timer (or the canceller) delivers the result, sets
        the token, and, if the handler is still running, calls ``give_up()`` on its own thread
        while holding the call's lock: the caller's thread is then abandoned (the caller must
        stop counting on it; keep ``give_up`` quick and never wait for that thread in it).
        ``on_done`` is called exactly once, on the calling thread, the timer's or the
        canceller's.
        """
        if not callable(give_up):
            raise TypeError(f"give_up must be callable, got {give_up!r}")
        backend = self._check(tool)
        call = self._admit(tool, arguments, ctx, on_done)
        if backend is not None and backend.runs_here:
            call.stop = self._stops[backend]
            call.here = functools.partial(backend.run_here, call, give_up)
        else:
            self._launch(call, backend)
        return CallHandle(call, self._cancel_call)

    def _check(self, tool: Tool) -> IsolationBackend | None:
        """The backend that runs ``tool``'s handler (``None`` for a tool without one), once it
        has checked, on the caller's thread, that the handler can start there."""
        if not isinstance(tool, Tool):
            raise TypeError(f"ToolRunner.start needs a Tool, got {type(tool).__name__}")
        if tool.handler is None or tool.isolation is None:
            return None
        backend = self._backends.get(tool.isolation)
        if backend is None:
            backend_named(tool.isolation)  # raises, naming the registered ones
            raise LookupError(f"isolation {tool.isolation!r} was registered after this "
                              "ToolRunner was built; build a new one")
        backend.check_start(tool)
        return backend

    @staticmethod
    def runs_here(tool: Tool) -> bool:
        """Whether :meth:`start_here` runs ``tool``'s handler on the calling thread."""
        return tool.handler is not None and tool.isolation is not None \
            and backend_named(tool.isolation).runs_here

    def _admit(
        self, tool: Tool, arguments: Any, ctx: CallContext | None, on_done: OnDone
    ) -> RunningCall:
        if not callable(on_done):
            raise TypeError(f"on_done must be callable, got {on_done!r}")
        if ctx is not None and not isinstance(ctx, CallContext):
            raise TypeError(f"ctx must be a CallContext or None, got {type(ctx).__name__}")
        token = OneShotEvent()  # set once (deadline, cancel): no Condition to build
        if ctx is None and tool.idle_timeout is None:  # (a model call) its reports would go
            liveness = None  # nowhere and no idle deadline reads them: no sink to keep
            ctx = CallContext(cancelled=token)
        else:
            liveness = Liveness(None if ctx is None else ctx.progress, self._clock)
            ctx = CallContext(cancelled=token, progress=liveness) if ctx is None \
                else _with_token(ctx, token, liveness)
        timeout = self._tool_timeout if tool.timeout is None else float(tool.timeout)
        call = RunningCall(tool, arguments, ctx, token=token, timeout=timeout, on_done=on_done)
        call.idle = liveness
        with self._lock:
            if self._closed:
                raise RuntimeError("this ToolRunner is closed; create a new one to run calls")
            self._inflight.add(call)
        self._counters.add("calls_started")
        return call

    def _launch(self, call: RunningCall, backend: IsolationBackend | None) -> None:
        if backend is None:
            self._settle_soon(call, not_found(call.tool, call.ctx))
        else:
            call.stop = self._stops[backend]
            backend.submit(call)

    def run(self, tool: Tool, arguments: Any, ctx: CallContext | None = None) -> HandlerResult:
        """Run one call and wait for its result."""
        return self.run_batch([(tool, arguments, ctx)])[0]

    def run_batch(
        self, calls: Sequence[tuple[Tool, Any, CallContext | None]]
    ) -> list[HandlerResult]:
        """Run ``calls`` concurrently and wait for all; results in input order."""
        results: list[HandlerResult | None] = [None] * len(calls)
        remaining = [len(calls)]
        all_done = threading.Event()
        lock = threading.Lock()

        def keeper(index: int) -> OnDone:
            def on_done(result: HandlerResult) -> None:
                results[index] = result
                with lock:
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        all_done.set()
            return on_done

        if not calls:
            return []
        for index, (tool, arguments, ctx) in enumerate(calls):
            self.start(tool, arguments, ctx, keeper(index))
        all_done.wait()
        return [r for r in results if r is not None]

    # -- settling calls (any runner thread) --------------------------------------------------

    def _arm(self, call: RunningCall) -> None:
        call.deadline = self._timer.schedule_with(call.timeout, self._expire_at, call)
        idle = call.tool.idle_timeout
        if idle is not None and isinstance(call.idle, Liveness):
            seconds = float(idle)
            call.idle.watch(self._timer, seconds,
                            lambda: self._expire(call, call.idle_timeout_error(seconds)))

    def _settle_soon(self, call: RunningCall, result: HandlerResult) -> None:
        self._timer.schedule(0.0, lambda: self._settle(call, result))

    @staticmethod
    def _disarm(call: RunningCall) -> None:
        """Call off the call's deadline and idle deadline (its later reports go nowhere)."""
        if call.deadline is not None:
            call.deadline.cancel()
        if call.idle is not None:
            call.idle.cancel()

    def _settle(self, call: RunningCall, result: HandlerResult) -> None:
        if call.claim():
            self._disarm(call)
            self._counters.add("calls_finished")
            self._deliver(call, result)
            return
        self._counters.add("late_results_discarded")
        _log.info("late_result_discarded", **call.log_fields(), result_type=type(result).__name__)

    def _expire(self, call: RunningCall, result: HandlerResult | None = None) -> None:
        """The call's deadline (or, given its ``result``, its idle deadline) came due."""
        if not call.claim():
            return
        call.token.set()
        self._disarm(call)
        self._counters.add("timeouts")
        self._deliver(call, call.timeout_error() if result is None else result)
        if call.stop is not None:
            call.stop(call)

    def _cancel(self, call: RunningCall) -> bool:
        if not call.claim():
            return False
        call.token.set()
        self._disarm(call)
        self._counters.add("cancelled")
        self._deliver(call, call.cancelled_error())
        if call.stop is not None:
            call.stop(call)
        return True

    def _deliver(self, call: RunningCall, result: HandlerResult) -> None:
        on_done, call.on_done = call.on_done, _delivered  # let go of the caller (e.g. a call
        # actor holding this call's handle: a cycle per call for the garbage collector)
        try:
            on_done(result)
        except Exception as exc:
            _log.error("on_done_failed", **call.log_fields(), error=repr(exc))
        finally:
            with self._lock:
                self._inflight.discard(call)
                if not self._inflight:
                    self._all_done.notify_all()

    # -- state and shutdown ------------------------------------------------------------------

    @property
    def stats(self) -> RunnerStats:
        """A snapshot of the counters (see :class:`RunnerStats`)."""
        gauges: dict[str, int] = {}
        for backend in self._backends.values():  # summed: two backends may run workers
            for name, value in backend.gauges().items():
                gauges[name] = gauges.get(name, 0) + value
        return self._counters.snapshot(**gauges)

    def close(self, grace: float | None = None) -> None:
        """Stop accepting calls, give running ones ``grace`` seconds (default ``close_grace``),
        cancel the rest, then close every backend (its threads, worker processes, event loop).

        Cancelled handlers then get ``close_grace`` seconds to return (cooperative ones see
        their token set). An abandoned thread whose handler still has not returned cannot be
        stopped: it is counted in ``stats.threads_hung`` and logged (``threads_left_hung``).
        Idempotent.
        """
        grace = self._close_grace if grace is None else grace
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._all_done.wait_for(lambda: not self._inflight, grace)
            leftover = list(self._inflight)
        for call in leftover:
            self._cancel(call)
        for backend in self._backends.values():
            backend.close(self._close_grace)
        self._timer.close()

    def __enter__(self) -> ToolRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
