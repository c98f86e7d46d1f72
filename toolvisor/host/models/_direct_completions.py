"""``CallCompletions``: a call's ``ctx.direct_completions``, asked through the agent's model path.

A completion is a model call like a run's own: started through the agent's ``ModelCalls`` (the
runner's deadline is the model timeout, a late answer is discarded), each failed attempt put
to ``on_model_error`` (a ``RetryAfter`` waits on the orchestrator's deadline timer, whose
callback only starts the next attempt), each attempt a ``chat`` span under the call's
``execute_tool`` span, its usage added to the run's when the call's outcome reaches the
machine. With a store, each completion is journaled under the call's durable id and step
``completion:<source>``: a replay of the call reads it back instead of paying for it again.
The call's end (its reply, on the call actor's thread: finished, timed out, cancelled, or its
run's work stopped) ends its completions: those in flight are cancelled, later ones refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolvisor._logging import get_event_log
from toolvisor.contract import (
    CapabilityError,
    ModelRequest,
    ModelResponse,
    Usage,
    UserMessage,
)
from toolvisor.durable import DurableError, RunStore
from toolvisor.executor import CallHandle, Deadline, DeadlineTimer
from toolvisor.host._protocol import ModelAnswer
from toolvisor.host.models._model_calls import ModelCalls
from toolvisor.host.observe import RunSpans, ToolSpan, model_names
from toolvisor.machine import CallToRun, MachineConfig, ModelPolicy, RetryAfter
from toolvisor.machine import apply_model_policy as decide

if TYPE_CHECKING:
    from opentelemetry.trace import Span

_log = get_event_log("completions")
NO_USAGE = Usage()  # what a call that made no completion spent (a frozen model: shared)

STEP_PREFIX = "completion:"
"""A completion's journal step is ``completion:<source>``."""


@dataclass(frozen=True, slots=True)
class CompletionModel:
    """A model a completion may ask: its calls, and its provider and model names."""

    calls: ModelCalls
    names: tuple[str, str]

    @classmethod
    def of(cls, calls: ModelCalls) -> CompletionModel:
        return cls(calls, model_names(calls.model))


@dataclass(frozen=True, slots=True)
class Completions:
    """What the completions of every call of one orchestrator share: the models by name
    (``None``: the run's model), the model policy and its bounds, the timer retries wait on,
    tracing and the store (``None``: nothing is journaled). Immutable."""

    models: Mapping[str | None, CompletionModel]
    policy: ModelPolicy
    max_attempts: int
    seed: int
    timer: DeadlineTimer
    tracing: RunSpans | None
    store: RunStore | None

    @classmethod
    def of(cls, models: ModelCalls, named_models: Mapping[str, ModelCalls], *,
           config: MachineConfig | None, tracing: RunSpans | None, store: RunStore | None,
           timer: DeadlineTimer) -> Completions:
        """The completions of an agent's calls.

        Args:
            models: The run's model (a request naming no model asks it).
            named_models: The other models a request may name.
            config: The machine's config, for its model policy and bounds (``None``: the
                defaults).
            tracing: Makes each attempt's span (``None``: the agent does not trace).
            store: Journals each completion (``None``: nothing is journaled).
            timer: The deadline timer the retries wait on.
        """
        asked: dict[str | None, CompletionModel] = {
            name: CompletionModel.of(calls) for name, calls in named_models.items()}
        asked[None] = CompletionModel.of(models)
        config = config or MachineConfig()
        return cls(asked, config.on_model_error, config.max_model_attempts, config.seed, timer,
                   tracing, store)

    def for_call(self, run_id: str, planned: CallToRun, durable_id: str | None,
                 span: ToolSpan | None, fence: int | None = None) -> CallCompletions:
        """The completions of one call execution (``durable_id``: its journal, with a store,
        written under the host's fencing token ``fence``)."""
        return CallCompletions(self, run_id, planned, durable_id, span, fence=fence)


@dataclass(eq=False, slots=True)
class _Ask:
    """One completion in flight: its request, model and source, the attempt running, and the
    future its answer (or error) goes to. Its fields are written under the call's lock."""

    request: ModelRequest
    model: CompletionModel
    source: str
    future: Future[ModelResponse]
    handle: CallHandle | None = None
    retry: Deadline | None = None
    attempts: int = 0


class CallCompletions:
    """``ctx.direct_completions`` of one call execution.

    Thread-safe: a handler's threads (or its context link's) ask, runner threads answer, the
    timer thread starts retries and the call actor's thread ends it. The lock guards whether
    the call ended, the completions in flight, the sources used, the ordinal and the usage.
    """

    def __init__(self, shared: Completions, run_id: str, planned: CallToRun,
                 durable_id: str | None, span: ToolSpan | None, *,
                 fence: int | None = None) -> None:
        self._shared = shared
        self._run_id = run_id
        self._fence = fence
        self._turn = planned.turn
        self._call_id = planned.call.id
        self._durable_id = durable_id
        self._span = span
        self._lock = threading.Lock()
        self._ended = False
        self._asks: dict[_Ask, None] = {}  # dicts used as sets: empty, or holding only
        self._sources: dict[str, None] = {}  # strings, a dict is no object the collector
        # tracks (a set always is), and most calls never ask
        self._ordinal = 0
        self._usage = NO_USAGE

    # -- the handler's side ---------------------------------------------------------------

    def complete(self, request: ModelRequest | str, source: str | None = None
                 ) -> ModelResponse:
        """Ask the model once and wait for its answer (see ``DirectCompletions``).

        Raises the last ``ModelError`` when ``on_model_error`` gives up, ``CapabilityError``
        when the request is refused or the call ended (before or while it ran).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise CapabilityError(
                "completion_blocks_event_loop",
                "complete() would block the event loop this handler runs on (and the model "
                "calls that run there); in an async def handler, use "
                "await ctx.direct_completions.acomplete(...)")
        started = self._start(request, source)
        if isinstance(started, ModelResponse):
            return started
        return self._finish(started, started.future.result())

    async def acomplete(self, request: ModelRequest | str, source: str | None = None
                        ) -> ModelResponse:
        """``complete`` for an ``async def`` handler: awaiting never blocks its event loop,
        and cancelling the awaiting task cancels the completion."""
        started = self._start(request, source)
        if isinstance(started, ModelResponse):
            return started
        try:
            response = await asyncio.wrap_future(started.future)
        except asyncio.CancelledError:
            self._cancel(started, CapabilityError("completion_cancelled",
                                                  "the awaiting task was cancelled"))
            raise
        return self._finish(started, response)

    # -- the call's end (the call actor's thread) -------------------------------------------

    def end(self) -> Usage:
        """The call is over: cancel the completions in flight, refuse later ones, and return
        what the completions spent."""
        with self._lock:
            self._ended = True
            asks = tuple(self._asks)  # none, for most calls: the shared empty tuple
            self._asks.clear()
            usage = self._usage
        for ask in asks:
            self._cancel(ask, CapabilityError(
                "completion_cancelled", "the call ended (it timed out, was cancelled, or its run "
                "ended) while its completion ran; the model call was cancelled"))
        return usage

    # -- inside -------------------------------------------------------------------------------

    def _start(self, request: ModelRequest | str, source: str | None) -> ModelResponse | _Ask:
        """Check the request, read it back from the journal if it was made before, else start
        its first attempt."""
        request = _request(request)
        model = self._shared.models.get(request.model)
        if model is None:
            names = sorted(name for name in self._shared.models if name is not None)
            raise CapabilityError(
                "completion_unknown_model",
                f"the request names model {request.model!r}, which the agent does not have; "
                f"its named models are {names} (Agent(models={{name: model}})), and model=None "
                "asks the run's model")
        with self._lock:
            if self._ended:
                raise CapabilityError(
                    "call_finished", "this call has ended: a completion is made while its call "
                    "runs (a thread the handler left behind cannot make one)")
            source = self._source(source)
        replayed = self._replayed(request, source)
        if replayed is not None:
            return replayed
        ask = _Ask(request, model, source, Future())
        with self._lock:
            if self._ended:
                raise CapabilityError("call_finished", "this call ended as the completion began")
            self._asks[ask] = None
        self._attempt(ask, 1)
        return ask

    def _source(self, source: str | None) -> str:
        """The completion's name within the call (under the lock)."""
        if source is None:
            self._ordinal += 1
            source = f"#{self._ordinal}"
        elif not isinstance(source, str) or not source or source.startswith("#"):
            raise CapabilityError(
                "completion_bad_request",
                f"source names a completion within its call: a non-empty str not starting with "
                f"'#' (those are the unnamed completions' ordinals), got {source!r}")
        if source in self._sources:
            raise CapabilityError(
                "completion_bad_request",
                f"source {source!r} was already used in this execution of the call; give "
                "every completion its own source (it is its replay key)")
        self._sources[source] = None
        return source

    def _journal(self) -> tuple[RunStore, str] | None:
        store = self._shared.store
        return None if store is None or self._durable_id is None else (store, self._durable_id)

    def _replayed(self, request: ModelRequest, source: str) -> ModelResponse | None:
        """The journaled answer of this completion, if an earlier execution of the call made
        it (its tokens count once more in the run's usage: they were never counted)."""
        journal = self._journal()
        if journal is None:
            return None
        store, durable_id = journal
        record = store.journal_record(self._run_id, durable_id, STEP_PREFIX + source)
        if record is None:
            return None
        asked = _canonical(request)
        if record.input != asked:
            raise DurableError(
                "durable_effect_replay_mismatch",
                f"completion {source!r} was journaled with request {record.input} but is now "
                f"asked {asked}; a replay must ask the same, or use a new source")
        response = ModelResponse.model_validate_json(record.output)
        self._spent(response)
        _log.info("completion_finished", **self._fields(source), outcome="replayed",
                  attempts=0, **_tokens(response))
        return response

    def _attempt(self, ask: _Ask, attempt: int) -> None:
        """Start attempt ``attempt`` of ``ask`` (on the asking thread, or the timer's)."""
        with self._lock:
            if ask.future.done():
                return
            ask.attempts = attempt
        tracing, span = self._shared.tracing, None
        scope = None
        if tracing is not None and self._span is not None:
            span = tracing.completion_call(self._span, ask.model.names, source=ask.source,
                                           attempt=attempt)
            scope = tracing.scope(span)
        _log.info("completion_started", **self._fields(ask.source), model=ask.model.names[1],
                  attempt=attempt)
        handle = ask.model.calls.start(
            ask.request.model_copy(update={"attempt": attempt}),
            functools.partial(self._answered, ask, attempt, span), None, scope)
        with self._lock:
            ask.handle = handle
            cancelled = ask.future.done()
        if cancelled:
            handle.cancel()

    def _answered(self, ask: _Ask, attempt: int, span: Span | None,
                  answer: ModelAnswer) -> None:
        """An attempt's answer (on a runner thread): deliver it, or retry as the policy says."""
        with self._lock:
            current = not ask.future.done() and ask.attempts == attempt
        if span is not None and self._shared.tracing is not None:
            self._shared.tracing.model_answered(span, answer if current else None)
        if not current:
            return
        if isinstance(answer, ModelResponse):
            self._settle(ask, answer, None)
            return
        shared = self._shared
        error = answer.with_attempt(attempt)
        decision = decide(shared.policy, error, seed=shared.seed, turn=self._turn)
        if isinstance(decision, RetryAfter) and attempt < shared.max_attempts:
            _log.info("completion_retry_scheduled", **self._fields(ask.source),
                      attempt=attempt + 1, reason=error.reason, seconds=decision.delay)
            with self._lock:
                if not ask.future.done():
                    ask.retry = shared.timer.schedule(
                        decision.delay, functools.partial(self._attempt, ask, attempt + 1))
            return
        self._settle(ask, None, error)

    def _settle(self, ask: _Ask, response: ModelResponse | None,
                error: BaseException | None) -> None:
        """Deliver ``ask``'s answer once (whoever comes second finds it done)."""
        with self._lock:
            if ask.future.done():
                return
            self._asks.pop(ask, None)
            with contextlib.suppress(InvalidStateError):  # an awaiting task cancelled it
                if error is None:
                    ask.future.set_result(response)  # type: ignore[arg-type]
                else:
                    ask.future.set_exception(error)
        if error is not None:
            _log.warning("completion_finished", **self._fields(ask.source),
                         outcome=getattr(error, "reason", None) or getattr(error, "code", "error"),
                         attempts=ask.attempts, error=str(error))

    def _cancel(self, ask: _Ask, error: CapabilityError) -> None:
        """Stop ``ask``: its retry and its model call are cancelled, its future fails."""
        with self._lock:
            handle, retry = ask.handle, ask.retry
        if retry is not None:
            retry.cancel()
        self._settle(ask, None, error)
        if handle is not None:
            handle.cancel()

    def _finish(self, ask: _Ask, response: ModelResponse) -> ModelResponse:
        """The answer came: journal it (with a store) and count its usage."""
        journal = self._journal()
        if journal is not None:
            store, durable_id = journal
            store.record_step(self._run_id, durable_id, STEP_PREFIX + ask.source,
                              _canonical(ask.request), response.model_dump_json(),
                              fence=self._fence)
        self._spent(response)
        _log.info("completion_finished", **self._fields(ask.source), outcome="ok",
                  attempts=ask.attempts, **_tokens(response))
        return response

    def _spent(self, response: ModelResponse) -> None:
        if response.usage is None:
            return
        with self._lock:
            if not self._ended:  # an answer after the call's outcome went out is not counted
                self._usage += response.usage

    def _fields(self, source: str) -> dict[str, Any]:
        return {"run_id": self._run_id, "tool_call_id": self._call_id, "source": source}


def _request(request: object) -> ModelRequest:
    """``request`` as a ``ModelRequest`` (a ``str`` is one user message), or refused."""
    if isinstance(request, str):
        if not request:
            raise CapabilityError("completion_bad_request",
                                  "a completion's prompt is empty: give it something to answer")
        return ModelRequest(messages=(UserMessage(content=request),))
    if not isinstance(request, ModelRequest):
        raise CapabilityError(
            "completion_bad_request",
            f"complete() takes a ModelRequest or a str (one user message), got "
            f"{type(request).__name__}")
    if not request.messages:
        raise CapabilityError("completion_bad_request",
                              "the ModelRequest has no messages: give the model something to "
                              "answer")
    return request.model_copy(update={"attempt": 1}) if request.attempt != 1 else request


def _canonical(request: ModelRequest) -> str:
    """The request as the journal keeps it: canonical JSON (its attempt left out)."""
    data = request.model_dump(mode="json", exclude={"attempt"})
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tokens(response: ModelResponse) -> dict[str, int | None]:
    usage = response.usage
    return {"input_tokens": None if usage is None else usage.input_tokens,
            "output_tokens": None if usage is None else usage.output_tokens}
