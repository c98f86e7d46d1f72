"""``OrchestratorActor``: hosts ``TurnMachine`` runs and performs their effects.

The machine decides; this actor only does what the effects say: it calls the model, hands each
tool call to its own ``ToolCallActor`` (through the dispatcher), sleeps before retries, and logs.
Tool outcomes come back as messages, so the actor never blocks waiting for a call and several
runs can share it.

With a session store it also makes runs durable: it saves the machine's checkpoint after every
machine step (before performing the step's effects, so no effect is ever performed that a
restart would not know about), gives each call a completion-key issuer and durable effects,
parks the keys of ``Pending`` calls, and continues a run when its keys resolve. A run waiting
on keys stays hosted here; one ``KeyWaiter`` thread per parked key blocks on the store and
tells this actor when the key resolves or its deadline passes, so the mailbox never blocks.

State: every ``_Run`` (its machine, watchers, timers, key waiters, cancel tokens) belongs to
this actor's thread. Other threads only ``tell`` it messages: tool-call actors report outcomes,
timers and key waiters report wake-ups, the ``Agent`` starts, answers, attaches and cancels
runs. A cancel token is an ``Event`` also set by the call actor's thread when the call ends.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pykka
from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor.actors._dispatch import ToolCallDispatcher
from toolvisor.actors._key_waiter import KeyWaiter
from toolvisor.actors._tool_call import CallOutcome as ActorOutcome
from toolvisor.contract import (
    CallContext,
    Err,
    HandlerResult,
    Model,
    ModelRequest,
    Ok,
    Pending,
    ToolCall,
    ToolError,
    ToolResultMessage,
)
from toolvisor.durable import (
    CompletionKeyIssuer,
    DurableEffects,
    Resolution,
    SessionStore,
    UnknownRunError,
    Wait,
)
from toolvisor.executor import OutputProjection, ProjectionPoint, encode_checked
from toolvisor.machine import (
    CallOutcome,
    Checkpoint,
    Done,
    Effect,
    EffectFailed,
    LlmCall,
    LogEvent,
    MachineConfig,
    ModelReplied,
    PendingCall,
    Progress,
    ResponseRefused,
    Sleep,
    Slept,
    StateView,
    Suspended,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.registry import ToolRegistry
from toolvisor.supervisors import SupervisedActor

ProgressCallback = Callable[[str, str, dict[str, Any]], None]
"""``(run_id, event, data)``: called on the orchestrator's thread; keep it quick."""

PENDING_TIMEOUT_CODE = "pending_deadline_exceeded"
"""The ``ToolError`` code a ``Pending`` call gets when its deadline passes unresolved."""


class OrchestratorStopped(RuntimeError):
    """The orchestrator stopped (the agent was closed, or it crashed) before the run ended."""


@dataclass(frozen=True, slots=True)
class StartRun:
    """Host ``machine`` from here on: perform ``effects``, then whatever follows."""

    run_id: str
    machine: TurnMachine
    effects: list[Effect]
    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class AnswerRun:
    """Resume a suspended run with ``answers``; reply with its next outcome.

    A run hosted here (waiting on keys) is resumed in place; otherwise it is restored from the
    store's latest checkpoint.
    """

    run_id: str
    answers: dict[str, Any]
    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class AttachRun:
    """Reply with the run's next outcome; a run not hosted here is restored from the store."""

    run_id: str
    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class CancelRun:
    """Cancel the run: its waits resolve as cancelled, the machine ends it
    ``Halted("cancelled")``; ``reply`` (if given) gets that outcome."""

    run_id: str
    reply: Future[Any] | None = None


@dataclass(frozen=True, slots=True)
class _CallDone:
    run_id: str
    effect_id: int
    outcome: CallOutcome
    key: str | None  # the completion key the call's handler took, if any


@dataclass(frozen=True, slots=True)
class _OutcomesReady:
    """Calls finished since the orchestrator last drained its ``_FinishedCalls``."""


class _FinishedCalls:
    """Outcomes that call threads finished and the orchestrator has not taken yet.

    Call threads ``add``; the orchestrator ``drain``s. Only the ``add`` that finds it empty
    tells the orchestrator, so a batch whose calls finish together costs one message, one
    machine step and one checkpoint instead of one per call. The lock guards only the list.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[_CallDone] = []

    def add(self, done: _CallDone) -> bool:
        """Keep ``done``; ``True`` if the orchestrator must be told."""
        with self._lock:
            self._items.append(done)
            return len(self._items) == 1

    def drain(self) -> list[_CallDone]:
        with self._lock:
            items, self._items = self._items, []
        return items


@dataclass(frozen=True, slots=True)
class _CallTarget:
    """Where a call's outcome goes, and the call's context and durable cancel token."""

    me: ActorRef[Any]
    run_id: str
    effect_id: int
    view: StateView
    ctx: CallContext
    token: threading.Event | None  # only in durable runs: there is nothing to cancel else


@dataclass(frozen=True, slots=True)
class _Woke:
    run_id: str
    effect_id: int


@dataclass(frozen=True, slots=True)
class _KeyResolved:
    run_id: str
    key: str


@dataclass(frozen=True, slots=True)
class _Parked:
    """A ``Pending`` call of the current suspension and the key it waits on."""

    call: ToolCall
    pending: PendingCall
    key: str


@dataclass(eq=False)
class _Run:
    run_id: str
    machine: TurnMachine
    watchers: list[Future[Any]]  # answered with the run's next outcome
    timers: dict[int, threading.Timer] = field(default_factory=dict)  # by Sleep effect id
    turn: int = 0  # the machine's turn, read from the last checkpoint (names durable calls)
    tokens: dict[tuple[int, str], threading.Event] = field(default_factory=dict)  # by
    # (effect id, call id): the durable cancel token of each running call
    waiters: dict[str, KeyWaiter] = field(default_factory=dict)  # by key
    suspended: bool = False  # the machine's last effect was Done(Suspended)
    failing: str | None = None  # fail_turn: the next waiting effect fails with this
    parked: tuple[int, dict[str, _Parked]] | None = None  # (Done effect id, its pending calls
    # by key): the keys of one suspension never change, so they are issued once


@dataclass(frozen=True, slots=True)
class OrchestratorSettings:
    """What every run hosted by one orchestrator shares.

    ``store`` makes runs durable; ``config`` is needed to restore runs from it.
    """

    model: Model
    registry: ToolRegistry
    dispatcher: ToolCallDispatcher
    projection: OutputProjection
    context: Any = None
    on_progress: ProgressCallback | None = None
    store: SessionStore | None = None
    config: MachineConfig | None = None
    key_poll_interval: float = 0.05


def durable_call_id(turn: int, attempt: int, call_id: str) -> str:
    """The id a call's keys and journal are filed under: unique within a run even when a
    model reuses call ids across turns, and the same when a restored run re-runs the call."""
    return f"{turn}.{attempt}.{call_id}"


def _run_status(checkpoint: Checkpoint) -> str:
    run = checkpoint.run
    if run.phase == "suspended":
        return "suspended"
    if run.final is None:
        return "running"
    if run.final.kind == "halted" and run.final.reason == "cancelled":
        return "cancelled"
    return run.final.kind


class OrchestratorActor(SupervisedActor, pykka.ThreadingActor):
    """Performs the effects of the runs it hosts; one actor serves all runs of an ``Agent``."""

    def __init__(self, settings: OrchestratorSettings) -> None:
        super().__init__()
        self._settings = settings
        self._store = settings.store
        self._runs: dict[str, _Run] = {}
        self._finished = _FinishedCalls()  # the one piece shared with call threads
        self._log = get_event_log("orchestrator")

    # --- messages ---------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        match message:
            case StartRun(run_id, machine, effects, reply):
                if self._store is not None and self._store.get_run(run_id) is None:
                    self._store.create_run(run_id)
                started = self._runs[run_id] = _Run(run_id, machine, [reply])
                self._log.info("run_started", run_id=run_id)
                self._perform(run_id, self._stepped(run_id, started, effects))
            case AnswerRun(run_id, answers, reply):
                self._answer(run_id, answers, reply)
            case AttachRun(run_id, reply):
                self._attach(run_id, reply)
            case _OutcomesReady():
                self._take_finished_calls()
            case _Woke(run_id, effect_id):
                run = self._runs.get(run_id)
                timer = run.timers.pop(effect_id, None) if run is not None else None
                if timer is not None:
                    timer.join()  # it has told us; its thread is ending
                self._respond(run_id, lambda m: m.send(Slept(effect_id)))
            case _KeyResolved(run_id, key):
                self._key_resolved(run_id, key)
            case CancelRun(run_id, reply):
                self._cancel(run_id, reply)
            case _:
                return super().on_receive(message)
        return None

    def _respond(self, run_id: str, step: Callable[[TurnMachine], list[Effect]]) -> None:
        run = self._runs.get(run_id)
        if run is None:
            self._log.debug("response_for_finished_run", run_id=run_id)
            return
        try:
            effects = step(run.machine)
        except ResponseRefused as exc:
            self._log.warning("response_refused", run_id=run_id, detail=str(exc))
            return
        self._perform(run_id, self._stepped(run_id, run, effects))

    def _stepped(self, run_id: str, run: _Run, effects: list[Effect]) -> list[Effect]:
        """After every machine step: save its checkpoint (one atomic write), then go on."""
        run.suspended = False
        if self._store is not None:
            checkpoint = run.machine.checkpoint()
            run.turn = checkpoint.run.turns
            self._store.save_checkpoint(run_id, checkpoint.run.next_effect_id - 1,
                                        checkpoint.to_json(), status=_run_status(checkpoint))
        return effects

    # --- runs the store knows ---------------------------------------------------------------

    def _adopt(self, run_id: str, reply: Future[Any]) -> _Run | None:
        """Host the run from the store's latest checkpoint; ``None`` (reply failed) if we can't."""
        store, config = self._store, self._settings.config
        try:
            if store is None or config is None:
                raise LookupError(f"run {run_id!r} is not running here and there is no session "
                                  "store to restore it from; give the agent a store")
            if store.get_run(run_id) is None:
                raise UnknownRunError(f"the session store has no run {run_id!r}")
            saved = store.latest_checkpoint(run_id)
            if saved is None:
                raise LookupError(f"run {run_id!r} stopped before its first checkpoint, before "
                                  "any effect was performed; start it again")
            machine = TurnMachine.restore(config, saved.data)
        except Exception as exc:
            reply.set_exception(exc)
            return None
        run = self._runs[run_id] = _Run(run_id, machine, [reply])
        run.turn = machine.checkpoint().run.turns
        self._log.info("run_restored", run_id=run_id, effect_id=saved.effect_id)
        return run

    def _attach(self, run_id: str, reply: Future[Any]) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            run.watchers.append(reply)
            return
        run = self._adopt(run_id, reply)
        if run is not None:
            self._perform(run_id, run.machine.reemit())

    def _answer(self, run_id: str, answers: dict[str, Any], reply: Future[Any]) -> None:
        hosted = self._runs.get(run_id)
        adopted = hosted is None
        run = self._adopt(run_id, reply) if hosted is None else hosted
        if run is None:
            return
        if not adopted:
            run.watchers.append(reply)
        try:
            effects = run.machine.resume(answers)
        except ResponseRefused as exc:
            run.watchers.remove(reply)
            reply.set_exception(exc)
            if adopted:
                self._drop(run)
            return
        self._perform(run_id, self._stepped(run_id, run, effects))

    def _cancel(self, run_id: str, reply: Future[Any] | None) -> None:
        run = self._runs.get(run_id)
        if run is None:
            if reply is None or self._store is None:
                self._log.debug("response_for_finished_run", run_id=run_id)
                return
            run = self._adopt(run_id, reply)
            if run is None:
                return
            if run.machine.finished:  # nothing to cancel: report how it ended
                self._perform(run_id, run.machine.reemit())
                return
        elif reply is not None:
            run.watchers.append(reply)
        if self._store is not None:
            cancelled = self._store.cancel_run(run_id)
            self._cancel_external_work(run, {w.key for w in cancelled
                                             if w.needs_external_cancel})
        self._release(run)
        self._respond(run_id, lambda m: m.cancel())

    def _cancel_external_work(self, run: _Run, keys: set[str]) -> None:
        """Call the tool's cancel hook for each cancelled key whose wait asked for it."""
        for key, entry in self._parked(run).items():
            if key not in keys:
                continue
            tool = self._settings.registry.resolve(entry.call.name)
            hook = None if isinstance(tool, Err) else tool.on_cancel
            if hook is None:
                self._log.warning("cancel_hook_missing", tool=entry.call.name,
                                  call_id=entry.call.id)
                continue
            try:
                hook(entry.call, key)
            except Exception as exc:
                self._log.error("cancel_hook_failed", tool=entry.call.name,
                                call_id=entry.call.id, error=f"{type(exc).__name__}: {exc}")
            else:
                self._log.info("external_work_cancelled", tool=entry.call.name,
                               call_id=entry.call.id)

    # --- deferred completion ----------------------------------------------------------------

    def _parked(self, run: _Run) -> dict[str, _Parked]:
        """The pending calls of the run's current suspension, by key (none if not suspended)."""
        store, done = self._store, run.machine.outstanding
        if store is None or not isinstance(done, Done) or not isinstance(done.outcome, Suspended):
            return {}
        if run.parked is not None and run.parked[0] == done.id:
            return run.parked[1]
        suspended = done.outcome
        records = {r.call.id: r for r in suspended.checkpoint.run.calls}
        parked: dict[str, _Parked] = {}
        for pending in suspended.pending:
            record = records[pending.call_id]
            key = store.issue_key(run.run_id, durable_call_id(suspended.checkpoint.run.turns,
                                                          record.attempt, pending.call_id))
            parked[key] = _Parked(record.call, pending, key)
        run.parked = (done.id, parked)
        return parked

    def _park(self, key: str, pending: Pending | PendingCall) -> Wait:
        """Record the wait (the first park wins: a restart does not move the deadline)."""
        assert self._store is not None
        deadline_at = None if pending.deadline is None else self._store.now() + pending.deadline
        return self._store.park(key, deadline_at=deadline_at, on_timeout=pending.on_timeout,
                                on_cancel=pending.on_cancel)

    def _settle_key(self, run_id: str, effect_id: int, outcome: CallOutcome,
                    key: str | None) -> None:
        """A call that took a key: park it if the call is ``Pending``, else revoke it."""
        run = self._runs.get(run_id)
        if run is not None:
            run.tokens.pop((effect_id, outcome.call_id), None)
        if key is None or self._store is None or run is None:
            return
        if isinstance(outcome.result, Pending):
            self._park(key, outcome.result)
        elif self._store.revoke(key):
            self._log.info("completion_key_revoked", run_id=run_id, call_id=outcome.call_id)

    def _suspended(self, run_id: str, run: _Run, outcome: Suspended) -> list[Effect]:
        """The run waits on keys: deliver those already resolved, else wait for them."""
        assert self._store is not None
        run.suspended = True
        parked = self._parked(run)
        ready: dict[str, tuple[_Parked, Resolution]] = {}
        for key, entry in parked.items():
            wait = self._park(key, entry.pending)
            if wait.resolution is not None:
                ready[entry.call.id] = (entry, wait.resolution)
            elif key not in run.waiters:
                me: ActorRef[Any] = self.actor_ref
                run.waiters[key] = KeyWaiter(
                    self._store, wait, self._settings.key_poll_interval,
                    functools.partial(_tell, me, _KeyResolved(run_id, key)))
        if ready:
            return self._deliver(run_id, run, outcome, ready)
        keys = {entry.call.id: key for key, entry in parked.items()}
        self._log.info("run_waiting_on_keys", run_id=run_id, call_ids=sorted(keys))
        self._reply(run, outcome.model_copy(update={"run_id": run_id, "keys": keys}))
        return []

    def _key_resolved(self, run_id: str, key: str) -> None:
        run = self._runs.get(run_id)
        if run is None:
            return
        waiter = run.waiters.pop(key, None)
        if waiter is not None:
            waiter.join()  # it has told us; its thread is ending
        done = run.machine.outstanding
        if run.suspended and isinstance(done, Done) and isinstance(done.outcome, Suspended):
            self._perform(run_id, self._suspended(run_id, run, done.outcome))

    def _deliver(self, run_id: str, run: _Run, outcome: Suspended,
                 ready: dict[str, tuple[_Parked, Resolution]]) -> list[Effect]:
        """Resume the machine with the resolved calls' results."""
        answers: dict[str, HandlerResult] = {}
        for call_id, (entry, resolution) in ready.items():
            if resolution.kind == "cancelled":  # cancelled from elsewhere (another process)
                self._cancel_external_work(run, {
                    e.key for e, r in ready.values()
                    if r.kind == "cancelled" and e.pending.on_cancel == "cancel_external_work"})
                self._release(run)
                return self._stepped(run_id, run, run.machine.cancel())
            answers[call_id] = self._result_of(entry, resolution)
            if resolution.kind == "timeout" and entry.pending.on_timeout == "fail_turn":
                run.failing = (f"tool call {call_id!r} ({entry.call.name}) was not resolved "
                               f"before its deadline (on_timeout='fail_turn')")
        if run.failing is not None:
            for call_id in outcome.call_ids:  # the turn is over: nothing else is awaited
                answers.setdefault(call_id, Err(ToolError(
                    "handler_exit", f"tool error: handler_exit: {run.failing}",
                    tool_call_id=call_id, code="turn_failed")))
            for key, waiter in list(run.waiters.items()):
                waiter.stop()
                waiter.join()
                del run.waiters[key]
                assert self._store is not None
                self._store.revoke(key)
        self._log.info("keys_delivered", run_id=run_id, call_ids=sorted(ready))
        return self._stepped(run_id, run, run.machine.resume(answers))

    @staticmethod
    def _result_of(entry: _Parked, resolution: Resolution) -> HandlerResult:
        call = entry.call
        if resolution.kind == "ok":
            return Ok(resolution.value)
        if resolution.kind == "error":
            return Err(resolution.value)
        return Err(ToolError(
            "timeout",
            f"tool error ({call.name}): timeout: the call's completion key was not resolved "
            f"within its deadline of {entry.pending.deadline} s",
            tool_name=call.name, tool_call_id=call.id, cause=entry.pending.deadline,
            code=PENDING_TIMEOUT_CODE))

    # --- effects ----------------------------------------------------------------------------

    def _perform(self, run_id: str, effects: Iterable[Effect]) -> None:
        """Perform effects in id order; a model call's reply is performed right after it."""
        queue = deque(effects)
        while queue:
            effect = queue.popleft()
            run = self._runs.get(run_id)
            if run is None:  # finished by an earlier effect of this queue
                return
            if run.failing is not None and isinstance(effect, LlmCall | ToolCalls | Sleep):
                failed = run.machine.send(EffectFailed(effect.id, run.failing))
                queue.extend(self._stepped(run_id, run, failed))
                continue
            match effect:
                case LlmCall():
                    queue.extend(self._stepped(run_id, run, self._call_model(run, effect)))
                case ToolCalls():
                    self._start_calls(run_id, run, effect)
                case Sleep(id=effect_id, seconds=seconds):
                    self._sleep(run_id, run, effect_id, seconds)
                case Progress(event=event, data=data):
                    self._log.debug("run_progress", run_id=run_id, progress=event, **data)
                    if self._settings.on_progress is not None:
                        self._settings.on_progress(run_id, event, dict(data))
                case LogEvent(level=level, event=event, fields=fields):
                    getattr(self._log, level)(event, run_id=run_id, **fields)
                case Done(outcome=Suspended() as outcome) if (
                        outcome.pending and self._store is not None):
                    queue.extend(self._suspended(run_id, run, outcome))
                case Done(outcome=outcome):
                    if isinstance(outcome, Suspended) and self._store is not None:
                        outcome = outcome.model_copy(update={"run_id": run_id})
                    self._finish(run_id, run, outcome)

    def _call_model(self, run: _Run, effect: LlmCall) -> list[Effect]:
        request = self._request_for_model(effect.request)
        try:
            response = self._settings.model.respond(request)
        except Exception as exc:
            self._log.error("model_call_failed", error=f"{type(exc).__name__}: {exc}")
            return run.machine.send(EffectFailed(effect.id, exc))
        return run.machine.send(ModelReplied(effect.id, response))

    def _request_for_model(self, request: ModelRequest) -> ModelRequest:
        """The catalog decides which tools the model sees; the budget may bound tool texts."""
        registry, projection = self._settings.registry, self._settings.projection
        messages = request.messages
        if projection.applies_at("request"):
            messages = tuple(
                m.model_copy(update={"content": projection.project(
                    "request", m.content, window=self._window(m.name), is_error=m.is_error)})
                if isinstance(m, ToolResultMessage) else m
                for m in messages
            )
        # Every part is a validated model already: validating them again costs ~1 ms a turn.
        return ModelRequest.model_construct(messages=messages, tools=registry.specs())

    def _window(self, tool_name: str) -> Any:
        tool = self._settings.registry.resolve(tool_name)
        return "head" if isinstance(tool, Err) else tool.output_window

    def _start_calls(self, run_id: str, run: _Run, effect: ToolCalls) -> None:
        me: ActorRef[Any] = self.actor_ref
        for planned in effect.calls:
            view = StateView(planned.state)
            token: threading.Event | None = None
            keys: CompletionKeyIssuer | None = None
            durable: DurableEffects | None = None
            if self._store is not None:
                token = run.tokens[effect.id, planned.call.id] = threading.Event()
                durable_id = durable_call_id(run.turn, planned.attempt, planned.call.id)
                keys = CompletionKeyIssuer(self._store, run_id, durable_id)
                durable = DurableEffects(self._store, run_id, durable_id, cancelled=token)
            ctx = CallContext(
                session_id=run_id,
                request_id=f"{run_id}/{planned.call.id}/{planned.attempt}",
                tool_call=planned.call,
                context=self._settings.context,
                attempt=planned.attempt,
                state=view,
                catalog=self._settings.registry.catalog_access,
                completion_keys=keys,
                durable=durable,
            )
            reply = functools.partial(self._call_finished,
                                      _CallTarget(me, run_id, effect.id, view, ctx, token))
            tool = self._settings.registry.resolve(planned.call.name, ctx)
            if isinstance(tool, Err):  # left the catalog: not_found, the handler never runs
                reply(ActorOutcome(planned.call.id, planned.call.name, tool,
                                   encode_checked(tool)[1]))
                continue
            self._settings.dispatcher.start_call(tool, planned.call, ctx, reply)

    def _call_finished(self, target: _CallTarget, outcome: ActorOutcome) -> None:
        """On the call actor's thread: bound the text, then hand the outcome to this actor.

        The call is over for the host, so its durable effects' cancel token is set: a handler
        the runner gave up on (timeout) stops awaiting external events.
        """
        if target.token is not None:
            target.token.set()
        text = outcome.text
        projection = self._settings.projection
        if projection.applies_at("dispatch") or projection.applies_at("history"):
            point: ProjectionPoint = "dispatch" if projection.applies_at("dispatch") else "history"
            text = projection.project(point, text, window=self._window(outcome.tool_name),
                                      is_error=outcome.is_error)
        done = CallOutcome(outcome.tool_call_id, outcome.result, text,
                           writes=target.view.writes)
        keys = target.ctx.completion_keys
        if self._finished.add(_CallDone(target.run_id, target.effect_id, done,
                                        None if keys is None else keys.issued)):
            _tell(target.me, _OutcomesReady())

    def _take_finished_calls(self) -> None:
        """Hand every finished call to its machine: one ``ToolResults`` per run and effect."""
        groups: dict[tuple[str, int], list[CallOutcome]] = {}
        for done in self._finished.drain():
            self._settle_key(done.run_id, done.effect_id, done.outcome, done.key)
            groups.setdefault((done.run_id, done.effect_id), []).append(done.outcome)
        for (run_id, effect_id), outcomes in groups.items():
            results = ToolResults(effect_id, tuple(outcomes))
            self._respond(run_id, functools.partial(TurnMachine.send, response=results))

    def _sleep(self, run_id: str, run: _Run, effect_id: int, seconds: float) -> None:
        me: ActorRef[Any] = self.actor_ref
        timer = threading.Timer(seconds, functools.partial(_tell, me, _Woke(run_id, effect_id)))
        timer.name = f"toolvisor-sleep-{run_id[:8]}"
        run.timers[effect_id] = timer
        timer.start()

    def _reply(self, run: _Run, outcome: Any) -> None:
        watchers, run.watchers = run.watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(outcome)

    def _finish(self, run_id: str, run: _Run, outcome: Any) -> None:
        self._drop(run)
        self._log.info("run_finished", run_id=run_id, outcome=type(outcome).__name__)
        self._reply(run, outcome)

    def _drop(self, run: _Run) -> None:
        del self._runs[run.run_id]
        self._release(run)

    @staticmethod
    def _release(run: _Run) -> None:
        """Stop the run's timers and key waiters; tell its running calls to stop."""
        for timer in run.timers.values():
            timer.cancel()
            timer.join()
        run.timers.clear()
        for waiter in run.waiters.values():
            waiter.stop()
        for waiter in run.waiters.values():
            waiter.join()
        run.waiters.clear()
        for token in run.tokens.values():
            token.set()
        run.tokens.clear()

    # --- lifecycle --------------------------------------------------------------------------

    def on_stop(self) -> None:
        self._abort_runs("the orchestrator was stopped before the run ended")

    def on_failure(self, *exc_info: Any) -> None:
        self._abort_runs(f"the orchestrator crashed: {exc_info[1]!r}")

    def _abort_runs(self, why: str) -> None:
        for run_id, run in list(self._runs.items()):
            self._release(run)
            for watcher in run.watchers:
                if not watcher.done():
                    watcher.set_exception(OrchestratorStopped(f"run {run_id}: {why}"))
        self._runs.clear()


def _tell(me: ActorRef[Any], message: Any) -> None:
    with contextlib.suppress(ActorDeadError):  # the orchestrator stopped: nobody waits
        me.tell(message)

