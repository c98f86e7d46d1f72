"""``OrchestratorActor``: hosts ``TurnMachine`` runs and performs their effects.

The machine decides; this actor does what the effects say: it starts each model call
(``ModelCalls``: off this thread, with a deadline), hands each tool call to its own
``ToolCallActor`` once its backoff is over, waits out a model call's backoff (on its deadline
timer), logs, and gives suspensions out signed (``Questions`` date their deadlines). Answers and
outcomes come back as messages: it never blocks. With a store it checkpoints every machine step
before performing its effects; ``DurableWaits`` give calls their keys and durable effects and
park ``Pending`` calls; ``RunLeases`` keep one host per run and claim runnable runs (a claimed
run that comes to wait on keys is handed back). One run's failure ends it alone; stopping the
actor (its agent closes) hands every run back, never cancels one.

A run leaves by the run-end ladder (``_stop_work``, ``_forget``, ``_hand_back``, ``_lose``,
``_end``: each does the rung before it, and more; ``host/README.md`` has the table).

State: every ``HostedRun`` belongs to this actor's thread, and so does its ``Crew``, each
collaborator keeping its per-run state by run id (``CallStarter``: calls and gates,
``ModelsInFlight``: model calls, ``DurableWaits``: key waiters and parked calls,
``RunObserver``: spans). Other threads only ``tell`` it the messages of ``_protocol.py``.
"""

from __future__ import annotations

import functools
import queue
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import pykka
from pykka import ActorRef

from toolvisor._logging import get_event_log
from toolvisor.durable import StaleLeaseError, StoreError, StoreUnavailableError
from toolvisor.host._hosted_run import HostedRun, hosted, watched
from toolvisor.host._mail import Reply, tell
from toolvisor.host._protocol import (
    AnswerRun,
    AttachRun,
    CancelRun,
    ClaimRuns,
    GateWoke,
    KeyResolved,
    ModelAnswered,
    ModelProgress,
    OrchestratorStopped,
    OutcomesReady,
    QuestionsDue,
    RenewLeases,
    RetryDue,
    RunLeasedError,
    RunMessage,
    SnapshotRun,
    StartRun,
    ToolProgressed,
    Woke,
)
from toolvisor.host.calls import send_results
from toolvisor.host.models import log_machine_event
from toolvisor.host.run._crew import Crew
from toolvisor.host.run._questions import suspended_now
from toolvisor.host.run._restore import rehosted
from toolvisor.host.run._run_tree import record_run
from toolvisor.host.run._settings import OrchestratorSettings
from toolvisor.host.sessions import answer_snapshot
from toolvisor.host.waits import Ready
from toolvisor.machine import (
    Done,
    Effect,
    Failed,
    LlmCall,
    LogEvent,
    NotPerformed,
    Progress,
    ResponseRefused,
    Sleep,
    Slept,
    Suspended,
    ToolCalls,
    TurnMachine,
)
from toolvisor.supervisors import SupervisedActor


class OrchestratorActor(SupervisedActor, pykka.ThreadingActor):
    """Performs the effects of the runs it hosts; one actor serves all runs of an ``Agent``."""

    use_daemon_thread = True  # no toolvisor thread keeps the interpreter alive

    def __init__(self, settings: OrchestratorSettings) -> None:
        super().__init__()
        self._settings = settings
        self._store, self._registry = settings.store, settings.registry
        self._runs: dict[str, HostedRun] = {}
        crew = Crew.of(settings, self.actor_ref, self._hosted_progress)
        self._leases, self._waits, self._observe = crew.leases, crew.waits, crew.observe
        self._timer, self._calls, self._models = crew.timer, crew.calls, crew.models
        self._questions = crew.questions
        self._log = get_event_log("orchestrator")

    @staticmethod
    def _create_actor_inbox() -> Any:
        # every run's messages pass here: the C queue costs a fraction of pykka's default
        return queue.SimpleQueue()

    # --- messages ---------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        match message:
            case OutcomesReady():
                self._take_finished_calls()
            case GateWoke(ticket):
                self._calls.gate_woke(ticket)
            case RenewLeases():
                self._renew_leases()
            case ClaimRuns(limit, claimed) if self._leases is not None:
                self._leases.claim(limit, claimed)  # then each claimed run is attached
            case RunMessage(run_id=run_id):
                try:
                    self._handle(message)
                except Exception as exc:  # one run's failure ends that run, never the host
                    self._crash(run_id, exc, getattr(message, "reply", None))
            case _:
                return super().on_receive(message)
        return None

    def _handle(self, message: RunMessage) -> None:
        match message:
            case StartRun(run_id, machine, effects, reply):
                if run_id in self._runs:  # a Suspended resumed again while its run goes on
                    reply.set_exception(ValueError(f"run {run_id} is already going on here; "
                                                   "a Suspended is resumed once at a time"))
                    return
                started = self._runs[run_id] = hosted(run_id, machine, reply, self._registry)
                if self._store is not None and self._store.get_run(run_id) is None:
                    record_run(self._store, self._settings.sessions, run_id)
                if self._leases is not None:
                    self._leases.take(run_id)
                self._log.info("run_started", run_id=run_id)
                self._observe.run_started(run_id, effects)
                self._perform(run_id, self._checkpointed(started, effects))
            case AnswerRun():
                self._answer(message)
            case AttachRun(run_id, reply, claimed):
                self._attach(run_id, reply, claimed=claimed)
            case Woke(run_id, effect_id):
                if (run := self._runs.get(run_id)) is not None:
                    run.timers.pop(effect_id, None)
                self._respond(run_id, lambda m: m.send(Slept(effect_id)))
            case RetryDue(run_id, call_id, attempt):
                if (run := self._runs.get(run_id)) is not None:
                    self._calls.retry_due(run, call_id, attempt)
            case ModelAnswered():
                self._model_answered(message)
            case ModelProgress():
                self._models.progress(message)
            case ToolProgressed(run_id, data) if run_id in self._runs:  # a report of a run
                self._observe.tool_progress(run_id, data)  # still hosted here
            case KeyResolved(run_id, key):
                self._key_resolved(run_id, key)
            case QuestionsDue(run_id):
                self._questions_due(run_id)
            case CancelRun(run_id, reply):
                self._cancel(run_id, reply)
            case SnapshotRun(run_id):
                run = self._runs.get(run_id)
                answer_snapshot(message, None if run is None else run.machine,
                                self._settings.sessions, self._store, self._settings.config)

    def _crash(self, run_id: str, exc: Exception, reply: Reply | None = None) -> None:
        """End run ``run_id`` alone (the other runs go on), ``Failed`` with what went wrong,
        logged with its traceback. Fenced off, or the store unreachable: let go (from its last
        checkpoint any host goes on); a write the store refused: stop there."""
        if isinstance(exc, StaleLeaseError | StoreUnavailableError):
            self._lose(run_id, exc, reply)
            return
        if isinstance(exc, StoreError):
            self._log.error("run_store_failed", run_id=run_id, problem=exc.problem, error=str(exc))
            if (run := watched(self._runs.get(run_id), exc, reply)) is not None:
                self._end(run, run.stopped_by(exc))
            return
        error = (f"the host could not go on with the run: {type(exc).__name__}: {exc}; the run "
                 "was ended, other runs were not affected")
        self._log.error("run_crashed", run_id=run_id, error=f"{type(exc).__name__}: {exc}",
                        traceback="".join(traceback.format_exception(exc)))
        if (run := watched(self._runs.get(run_id), exc, reply)) is None:
            return
        try:
            outcome = run.failed(error)
            self._save(run)
        except Exception as again:  # the run's state itself is broken: say so, keep nothing
            self._log.error("run_abort_failed", run_id=run_id, error=repr(again))
            outcome = run.failed(error, abort=False)
        self._end(run, outcome)

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
        self._perform(run_id, self._checkpointed(run, effects))

    def _checkpointed(self, run: HostedRun, effects: list[Effect]) -> list[Effect]:
        """After every machine step: save its checkpoint (one atomic write), then go on."""
        if self._waits is not None:
            self._waits.stepped(run.run_id)
        self._save(run)
        return effects

    def _save(self, run: HostedRun) -> None:
        machine = run.machine
        if self._store is not None and self._leases is not None:
            self._store.save_checkpoint(run.run_id, machine.last_effect_id,
                                        machine.checkpoint().to_json(), status=machine.status,
                                        fence=self._leases.token(run.run_id))

    # --- runs the store knows ---------------------------------------------------------------

    def _adopt(self, run_id: str, reply: Future[Any]) -> HostedRun | None:
        """Host the run from the store's latest checkpoint; ``None`` (reply failed) if we can't."""
        run = rehosted(self._store, self._settings.config, self._leases, run_id, reply,
                       registry=self._registry)
        if run is not None:
            self._runs[run_id] = run
            self._log.info("run_restored", run_id=run_id, effect_id=run.machine.last_effect_id)
            self._observe.run_started(run_id, None)
        return run

    def _attach(self, run_id: str, reply: Future[Any], *, claimed: bool = False) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            run.watchers.append(reply)
            return
        run = self._adopt(run_id, reply)
        if run is None:
            return
        run.claimed = claimed
        failed = run.machine.outstanding
        if isinstance(failed, Done) and isinstance(failed.outcome, Failed) \
                and failed.outcome.model_error is not None:  # try its model again
            self._log.info("model_retry_on_resume", run_id=run_id)
            self._perform(run_id, self._checkpointed(run, run.machine.retry_model()))
            return
        self._perform(run_id, run.machine.reemit())

    def _answer(self, message: AnswerRun) -> None:
        run_id, reply = message.run_id, message.reply
        adopted = (run := self._runs.get(run_id)) is None
        run = self._adopt(run_id, reply) if run is None else run
        if run is None:
            return
        if not adopted:
            run.watchers.append(reply)
        try:
            self._questions.refuse_spent(run, message)
            effects = run.machine.resume(message.answers, now=self._questions.clock())
        except ResponseRefused as exc:
            run.watchers.remove(reply)
            reply.set_exception(exc)
            if adopted:
                self._hand_back(run)
                self._observe.run_finished(run_id, "answer_refused")
            return
        self._questions.disarm(run_id)
        self._perform(run_id, self._checkpointed(run, effects))

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
        if self._waits is not None:
            self._waits.cancel(run)
        self._questions.disarm(run_id)
        self._stop_work(run)
        self._respond(run_id, lambda m: m.cancel())

    # --- suspensions and their questions -----------------------------------------------------

    def _suspension(self, run: HostedRun, outcome: Suspended) -> list[Effect]:
        """Date its new questions (saved first), answer the due ones, else wait or give out."""
        if self._questions.date(run):
            self._save(run)
            outcome = suspended_now(run.machine)
        due = run.machine.expire_questions(self._questions.clock())
        if due:
            return self._checkpointed(run, due)
        self._questions.arm(run.run_id, outcome)
        if outcome.pending and self._store is not None:
            return self._suspended(run, outcome)
        self._end(run, self._signed(outcome.model_copy(update={"run_id": run.run_id})))
        return []

    def _questions_due(self, run_id: str) -> None:
        """Answer due questions here, adopting the run unless another host drives it."""
        now = self._questions.clock()
        run = self._runs.get(run_id)
        if run is None and self._questions.due_in_store(run_id, now):
            reply: Future[Any] = Future()
            run = self._adopt(run_id, reply)
            if run is None:
                self._log.info("question_expiry_deferred", run_id=run_id,
                               error=repr(reply.exception()))
        if run is not None and (effects := run.machine.expire_questions(now)):
            self._perform(run_id, self._checkpointed(run, effects))

    # --- deferred completion ----------------------------------------------------------------

    def _suspended(self, run: HostedRun, outcome: Suspended) -> list[Effect]:
        """The run waits on keys: deliver those already resolved, else wait for them."""
        assert self._waits is not None
        ready = self._waits.wait(run, outcome)
        if ready:
            return self._deliver(run, outcome, ready)
        keys = self._waits.waiting_keys(run)
        self._log.info("run_waiting_on_keys", run_id=run.run_id, call_ids=sorted(keys))
        run.reply(self._signed(outcome.model_copy(update={"run_id": run.run_id, "keys": keys})))
        if run.claimed:  # hand it back: whoever claims it once it is woken drives it on
            self._log.info("run_released", run_id=run.run_id)
            self._observe.run_finished(run.run_id, "released")
            self._hand_back(run, goes_on=True)
        return []

    def _key_resolved(self, run_id: str, key: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and self._waits is not None \
                and (suspended := self._waits.key_resolved(run, key)) is not None:
            self._perform(run_id, self._suspended(run, suspended))

    def _deliver(self, run: HostedRun, outcome: Suspended, ready: Ready) -> list[Effect]:
        """Resume the machine with the resolved calls' results (or cancel it)."""
        assert self._waits is not None
        answers = self._waits.answers(run, outcome, ready)
        if answers is None:  # a wait was cancelled from elsewhere (another process)
            self._stop_work(run)
            return self._checkpointed(run, run.machine.cancel())
        return self._checkpointed(run, run.machine.resume(answers))

    # --- effects ----------------------------------------------------------------------------

    def _perform(self, run_id: str, effects: Iterable[Effect]) -> None:
        """Perform effects in id order; a model call's reply is performed right after it."""
        queue = deque(effects)
        while queue:
            effect = queue.popleft()
            run = self._runs.get(run_id)
            if run is None:  # finished by an earlier effect of this queue
                return
            failing = None if self._waits is None else self._waits.failing(run_id)
            if failing is not None and isinstance(effect, LlmCall | ToolCalls | Sleep):
                failed = run.machine.send(NotPerformed(effect.id, failing))
                queue.extend(self._checkpointed(run, failed))
                continue
            match effect:
                case LlmCall():
                    self._models.start(run_id, effect, run.catalog)
                case ToolCalls():
                    self._calls.start(run, effect)
                case Sleep(id=effect_id, seconds=seconds):
                    self._sleep(run, effect_id, seconds)
                case Progress(event=event, data=data):
                    self._observe.progress(run_id, event, data)
                case LogEvent(level=level, event=event, fields=fields):
                    log_machine_event(self._log, run_id, level, event, fields)
                    self._observe.machine_event(run_id, event, fields)
                case Done(outcome=Suspended() as outcome):
                    queue.extend(self._suspension(run, outcome))
                case Done(outcome=outcome):
                    self._end(run, outcome)

    def _signed(self, outcome: Suspended) -> Suspended:
        """``outcome`` as it leaves the process: signed, so a forged one is never resumed."""
        return outcome.model_copy(update={
            "signature": self._settings.signer.sign(outcome.signed_text())})

    def _hosted_progress(self, run_id: str, event: str, data: dict[str, Any]) -> None:
        """Progress the run's collaborators report (a breaker's move), while it is hosted."""
        if run_id in self._runs:
            self._observe.tell_progress(run_id, event, data)

    def _model_answered(self, message: ModelAnswered) -> None:
        response = self._models.answered(message)
        self._respond(message.run_id, lambda m: m.send(response))

    def _take_finished_calls(self) -> None:
        """Hand every finished call to its machine: one ``ToolResults`` per run, for the
        ``ToolCalls`` effect it waits on now (a superseding effect takes over the calls of the
        one before)."""
        for run_id, outcomes in self._calls.take_finished(self._runs.keys(), self._crash).items():
            try:
                self._respond(run_id, functools.partial(send_results, outcomes=outcomes))
            except Exception as exc:  # one run's failure ends that run, never the host
                self._crash(run_id, exc)

    def _sleep(self, run: HostedRun, effect_id: int, seconds: float) -> None:
        """Wait out a model call's backoff (a restored run only what is left of it)."""
        me: ActorRef[Any] = self.actor_ref
        if effect_id == run.reemitted and self._waits is not None:
            seconds -= self._waits.waited(run.run_id, effect_id)
        run.timers[effect_id] = self._timer.schedule(
            seconds, functools.partial(tell, me, Woke(run.run_id, effect_id)))

    # --- the run-end ladder: each rung does the one before it, and more ---------------------

    def _stop_work(self, run: HostedRun, *, goes_on: bool = False) -> None:
        """Stop what was started for the run (it stays hosted): its model call, its calls,
        its timers, its key waiters; ``goes_on``: the run goes on elsewhere or later, the
        children its calls relay waiting with it."""
        run_id = run.run_id
        self._models.stop_work(run_id)
        self._calls.stop_work(run_id, run_goes_on=goes_on)
        run.cancel_timers()
        if self._waits is not None:
            self._waits.stop_work(run_id)

    def _forget(self, run: HostedRun, *, goes_on: bool = False) -> None:
        """The run leaves this host's memory: its work stopped, every collaborator forgets it."""
        del self._runs[run.run_id]
        self._stop_work(run, goes_on=goes_on)
        if self._waits is not None:
            self._waits.forget(run.run_id)

    def _hand_back(self, run: HostedRun, *, goes_on: bool = False) -> None:
        """Forget the run and give its lease up: it ended, or (``goes_on``) it goes on
        elsewhere or later, the children its calls relay waiting with it (a suspended run is
        let go on its own keys)."""
        waiting = None if self._waits is None else self._waits.own_keys(run)
        self._forget(run, goes_on=goes_on)
        if self._leases is not None:
            self._leases.give_up(run.run_id, waiting)

    def _lose(self, run_id: str, error: Exception, reply: Reply | None = None) -> None:
        """Another host holds the run's lease now: forget it, writing nothing more, and fail
        its watchers with ``error``."""
        if (run := watched(self._runs.get(run_id), error, reply)) is None:
            return
        self._log.error("lease_lost", run_id=run_id)
        self._observe.run_finished(run_id, None)
        self._hand_back(run, goes_on=True)  # the lease is another's: this only forgets our token
        run.fail(error)

    def _end(self, run: HostedRun, outcome: Any) -> None:
        """Deliver the run's ``outcome``, stamped with its id (a relayed child resolves its
        parent call's key with it), and hand the run back."""
        outcome = outcome.model_copy(update={"run_id": run.run_id})
        self._hand_back(run)
        self._log.info("run_returned", run_id=run.run_id, outcome=type(outcome).__name__)
        self._observe.run_finished(run.run_id, outcome)
        if self._settings.sessions is not None:
            self._settings.sessions.ended(run.run_id, outcome)
        run.reply(outcome)

    def _renew_leases(self) -> None:
        """Keep hosting only the runs whose lease this host still holds."""
        assert self._leases is not None
        for run_id in self._leases.renew():
            self._lose(run_id, RunLeasedError(f"run {run_id!r} was taken over by another "
                                                "host: its lease was not renewed in time"))

    # --- lifecycle --------------------------------------------------------------------------

    def on_stop(self) -> None:
        self._hand_back_all("the orchestrator was stopped before the run ended")

    def on_failure(self, *exc_info: Any) -> None:
        self._hand_back_all(f"the orchestrator crashed: {exc_info[1]!r}")

    def _hand_back_all(self, why: str) -> None:
        """Hand every run back as after a crash, never cancelled: it stays in the store as it
        was (its relayed children too), its lease given up, its watchers failed."""
        for run_id, run in list(self._runs.items()):
            self._observe.run_finished(run_id, None)
            try:
                self._hand_back(run, goes_on=True)
            except Exception as exc:  # the store failed: closing the leases tries again
                self._log.error("run_release_failed", run_id=run_id, error=repr(exc))
            run.fail(OrchestratorStopped(f"run {run_id}: {why}"))
        self._calls.close()
        self._timer.close()
        self._questions.close()
        if self._leases is not None:
            self._leases.close()

