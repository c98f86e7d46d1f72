"""``OrchestratorActor``: hosts ``TurnMachine`` runs and performs their effects.

The machine decides; this actor only does what the effects say: it calls the model, hands each
tool call to its own ``ToolCallActor`` (through the dispatcher), sleeps before retries, and logs.
Tool outcomes come back as messages, so the actor never blocks waiting for a call and several
runs can share it.

State: every ``_Run`` (its machine, its reply future, its timers) belongs to this actor's
thread. Other threads only ``tell`` it messages: tool-call actors report outcomes, timers report
wake-ups, the ``Agent`` starts and cancels runs.
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
from toolvisor.actors._tool_call import CallOutcome as ActorOutcome
from toolvisor.contract import (
    CallContext,
    Err,
    Model,
    ModelRequest,
    ToolResultMessage,
)
from toolvisor.executor import OutputProjection, ProjectionPoint, encode_checked
from toolvisor.machine import (
    CallOutcome,
    CallToRun,
    Done,
    Effect,
    EffectFailed,
    LlmCall,
    LogEvent,
    ModelReplied,
    Progress,
    ResponseRefused,
    Sleep,
    Slept,
    StateView,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.registry import ToolRegistry
from toolvisor.supervisors import SupervisedActor

ProgressCallback = Callable[[str, str, dict[str, Any]], None]
"""``(run_id, event, data)``: called on the orchestrator's thread; keep it quick."""


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
class CancelRun:
    """Cancel the run: the machine ends it ``Halted("cancelled")``."""

    run_id: str


@dataclass(frozen=True, slots=True)
class _CallDone:
    run_id: str
    effect_id: int
    outcome: CallOutcome


@dataclass(frozen=True, slots=True)
class _Woke:
    run_id: str
    effect_id: int


@dataclass(eq=False)
class _Run:
    machine: TurnMachine
    reply: Future[Any]
    timers: dict[int, threading.Timer] = field(default_factory=dict)  # by Sleep effect id


@dataclass(frozen=True, slots=True)
class OrchestratorSettings:
    """What every run hosted by one orchestrator shares."""

    model: Model
    registry: ToolRegistry
    dispatcher: ToolCallDispatcher
    projection: OutputProjection
    context: Any = None
    on_progress: ProgressCallback | None = None


class OrchestratorActor(SupervisedActor, pykka.ThreadingActor):
    """Performs the effects of the runs it hosts; one actor serves all runs of an ``Agent``."""

    def __init__(self, settings: OrchestratorSettings) -> None:
        super().__init__()
        self._settings = settings
        self._runs: dict[str, _Run] = {}
        self._log = get_event_log("orchestrator")

    # --- messages ---------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        match message:
            case StartRun(run_id, machine, effects, reply):
                self._runs[run_id] = _Run(machine, reply)
                self._log.info("run_started", run_id=run_id)
                self._perform(run_id, effects)
            case _CallDone(run_id, effect_id, outcome):
                self._respond(run_id, lambda m: m.send(ToolResults(effect_id, (outcome,))))
            case _Woke(run_id, effect_id):
                run = self._runs.get(run_id)
                timer = run.timers.pop(effect_id, None) if run is not None else None
                if timer is not None:
                    timer.join()  # it has told us; its thread is ending
                self._respond(run_id, lambda m: m.send(Slept(effect_id)))
            case CancelRun(run_id):
                self._respond(run_id, lambda m: m.cancel())
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
        self._perform(run_id, effects)

    # --- effects ----------------------------------------------------------------------------

    def _perform(self, run_id: str, effects: Iterable[Effect]) -> None:
        """Perform effects in id order; a model call's reply is performed right after it."""
        queue = deque(effects)
        while queue:
            effect = queue.popleft()
            run = self._runs[run_id]
            match effect:
                case LlmCall():
                    queue.extend(self._call_model(run, effect))
                case ToolCalls():
                    self._start_calls(run_id, effect)
                case Sleep(id=effect_id, seconds=seconds):
                    self._sleep(run_id, run, effect_id, seconds)
                case Progress(event=event, data=data):
                    self._log.debug("run_progress", run_id=run_id, progress=event, **data)
                    if self._settings.on_progress is not None:
                        self._settings.on_progress(run_id, event, dict(data))
                case LogEvent(level=level, event=event, fields=fields):
                    getattr(self._log, level)(event, run_id=run_id, **fields)
                case Done(outcome=outcome):
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
        return ModelRequest(messages=messages, tools=registry.specs())

    def _window(self, tool_name: str) -> Any:
        tool = self._settings.registry.resolve(tool_name)
        return "head" if isinstance(tool, Err) else tool.output_window

    def _start_calls(self, run_id: str, effect: ToolCalls) -> None:
        me: ActorRef[Any] = self.actor_ref
        for planned in effect.calls:
            view = StateView(planned.state)
            ctx = self._context_for(run_id, planned, view)
            reply = functools.partial(self._call_finished, me, run_id, effect.id, view)
            tool = self._settings.registry.resolve(planned.call.name, ctx)
            if isinstance(tool, Err):  # left the catalog: not_found, the handler never runs
                reply(ActorOutcome(planned.call.id, planned.call.name, tool,
                                   encode_checked(tool)[1]))
                continue
            self._settings.dispatcher.start_call(tool, planned.call, ctx, reply)

    def _context_for(self, run_id: str, planned: CallToRun, view: StateView) -> CallContext:
        return CallContext(
            session_id=run_id,
            request_id=f"{run_id}/{planned.call.id}/{planned.attempt}",
            tool_call=planned.call,
            context=self._settings.context,
            attempt=planned.attempt,
            state=view,
            catalog=self._settings.registry.catalog_access,
        )

    def _call_finished(self, me: ActorRef[Any], run_id: str, effect_id: int, view: StateView,
                       outcome: ActorOutcome) -> None:
        """On the call actor's thread: bound the text, then hand the outcome to this actor."""
        text = outcome.text
        projection = self._settings.projection
        if projection.applies_at("dispatch") or projection.applies_at("history"):
            point: ProjectionPoint = "dispatch" if projection.applies_at("dispatch") else "history"
            text = projection.project(point, text, window=self._window(outcome.tool_name),
                                      is_error=outcome.is_error)
        done = CallOutcome(outcome.tool_call_id, outcome.result, text, writes=view.writes)
        with contextlib.suppress(ActorDeadError):  # the orchestrator stopped: nobody waits
            me.tell(_CallDone(run_id, effect_id, done))

    def _sleep(self, run_id: str, run: _Run, effect_id: int, seconds: float) -> None:
        me: ActorRef[Any] = self.actor_ref

        def wake() -> None:
            with contextlib.suppress(ActorDeadError):
                me.tell(_Woke(run_id, effect_id))

        timer = threading.Timer(seconds, wake)
        timer.name = f"toolvisor-sleep-{run_id[:8]}"
        run.timers[effect_id] = timer
        timer.start()

    def _finish(self, run_id: str, run: _Run, outcome: Any) -> None:
        del self._runs[run_id]
        self._stop_timers(run)
        self._log.info("run_finished", run_id=run_id, outcome=type(outcome).__name__)
        if not run.reply.done():
            run.reply.set_result(outcome)

    @staticmethod
    def _stop_timers(run: _Run) -> None:
        for timer in run.timers.values():
            timer.cancel()
            timer.join()
        run.timers.clear()

    # --- lifecycle --------------------------------------------------------------------------

    def on_stop(self) -> None:
        self._abort_runs("the orchestrator was stopped before the run ended")

    def on_failure(self, *exc_info: Any) -> None:
        self._abort_runs(f"the orchestrator crashed: {exc_info[1]!r}")

    def _abort_runs(self, why: str) -> None:
        for run_id, run in list(self._runs.items()):
            self._stop_timers(run)
            if not run.reply.done():
                run.reply.set_exception(OrchestratorStopped(f"run {run_id}: {why}"))
        self._runs.clear()

