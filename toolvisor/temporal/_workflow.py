"""``AgentRun``: one run as a Temporal workflow, the ``TurnMachine`` and a small driver.

The driver turns the machine's effects into Temporal commands: an ``LlmCall`` is an activity
keyed by its effect id, each call of a ``ToolCalls`` an activity keyed by its turn, attempt
and call id (the calls of one batch run at once, each fed back as it finishes), a ``Sleep``
or a retry's ``Backoff`` a durable timer. Every activity has one attempt: the agent's
``on_model_error`` and ``on_tool_error`` are the only retry authority. A suspended run waits
in place for the ``answer`` and ``complete`` updates, each validated before it enters the
history, its questions' ``expires_in`` and its pending calls' deadlines durable timers on
``workflow.now()``.

Deterministic: no I/O, every clock is ``workflow.now()``, the retry jitter's seed is drawn
from ``workflow.random()``. The worker passes toolvisor through Temporal's sandbox (see
``_worker``), this module included. All state is the workflow's own (the machine, the
updates' inbox, when each effect was emitted), touched only on the workflow's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from toolvisor.contract import Err, HandlerResult, ModelError, ToolError
from toolvisor.host import PENDING_TIMEOUT_CODE
from toolvisor.machine import (
    CallOutcome,
    CallToRun,
    Done,
    Effect,
    LlmCall,
    LogEvent,
    ModelReplied,
    NotPerformed,
    PendingCall,
    Question,
    Response,
    Sleep,
    Slept,
    Suspended,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.temporal._activities import MODEL_ACTIVITY, TOOL_ACTIVITY
from toolvisor.temporal._agent import TemporalAgent
from toolvisor.temporal._codec import (
    answer_from_json,
    outcome_to_json,
    result_from_json,
)
from toolvisor.temporal._registry import UnknownAgentError, agent_named

WORKFLOW = "toolvisor.run"
ONE_ATTEMPT = RetryPolicy(maximum_attempts=1)
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}
CallKey = tuple[int, int, str]  # (turn, attempt, call id): one attempt of one call


@workflow.defn(name=WORKFLOW)
class AgentRun:
    """One agent run: ``run`` drives its machine to a ``Completed``, ``Halted`` or ``Failed``
    (returned as JSON data, never raised); the updates answer and complete its waiting calls."""

    @workflow.init
    def __init__(self, start: dict[str, Any]) -> None:
        self._token = start.get("token")  # the start_or_answer call that started the run
        self._machine: TurnMachine | None = None
        self._inbox: dict[str, Any] = {}  # answers and completions the updates brought
        self._emitted_at: dict[int, float] = {}  # ToolCalls effect id -> workflow time
        self._parked_at: dict[str, float] = {}  # pending call id -> when the run parked it

    @workflow.run
    async def run(self, start: dict[str, Any]) -> dict[str, Any]:
        """Run agent ``start["agent"]`` on ``start["prompt"]`` (and ``start["state"]``)."""
        agent = _agent(start)
        machine = self._machine = TurnMachine(
            agent.machine_config(workflow.random().getrandbits(32)))
        try:
            self._take(machine.start(start.get("prompt", ""), state=start.get("state")))
        except (TypeError, ValueError) as exc:  # no run can come of it: fail once, naming it
            raise ApplicationError(f"the run's start was refused: {exc}",
                                   type="RunStartRefused", non_retryable=True) from exc
        try:
            while True:
                waiting = machine.outstanding
                if isinstance(waiting, Done):
                    if not isinstance(waiting.outcome, Suspended):
                        return outcome_to_json(waiting.outcome)
                    await self._resume(waiting.outcome)
                elif isinstance(waiting, LlmCall):
                    self._take(machine.send(await _ask_model(agent, waiting)))
                elif isinstance(waiting, Sleep):
                    await workflow.sleep(waiting.seconds)
                    self._take(machine.send(Slept(waiting.id)))
                elif isinstance(waiting, ToolCalls):
                    await self._run_calls(agent, waiting)
        except asyncio.CancelledError:
            self._take(machine.cancel())
            done = machine.outstanding
            assert isinstance(done, Done) and not isinstance(done.outcome, Suspended)
            return outcome_to_json(done.outcome)

    # -- effects ---------------------------------------------------------------------------

    def _take(self, effects: list[Effect]) -> None:
        """Log the machine's log events; note when each ``ToolCalls`` was emitted (its
        retries' backoffs count from then)."""
        for effect in effects:
            if isinstance(effect, LogEvent):
                workflow.logger.log(_LEVELS[effect.level], effect.event,
                                    extra={"toolvisor": effect.fields})
            elif isinstance(effect, ToolCalls):
                self._emitted_at[effect.id] = workflow.now().timestamp()

    async def _run_calls(self, agent: TemporalAgent, effect: ToolCalls) -> None:
        """Run the effect's calls as concurrent activities, each outcome sent as it comes, and
        the retries of the effects that supersede it, until the machine waits on no call."""
        machine = self._machine
        assert machine is not None
        started: dict[CallKey, asyncio.Task[CallOutcome]] = {}
        running: list[asyncio.Task[CallOutcome]] = []
        waiting: Effect | None = effect
        try:
            while isinstance(waiting, ToolCalls):
                for planned in waiting.calls:
                    key = (planned.turn, planned.attempt, planned.call.id)
                    if key not in started:
                        started[key] = task = asyncio.create_task(self._call(agent, planned))
                        running.append(task)
                await workflow.wait(running, return_when=asyncio.FIRST_COMPLETED)
                finished = [task for task in running if task.done()]  # in start order
                running = [task for task in running if not task.done()]
                self._take(machine.send(ToolResults(
                    waiting.id, tuple(task.result() for task in finished))))
                waiting = machine.outstanding
        finally:
            for task in running:  # the batch ended (or the run was cancelled)
                task.cancel()

    async def _call(self, agent: TemporalAgent, planned: CallToRun) -> CallOutcome:
        """One attempt of one call as an activity, after its retry's backoff (a timer); a
        lost or failed activity is the call's ``handler_exit``, for ``on_tool_error``."""
        call = planned.call
        if planned.backoff is not None:
            since = self._emitted_at.get(planned.backoff.since, workflow.now().timestamp())
            left = planned.backoff.seconds - (workflow.now().timestamp() - since)
            if left > 0:
                await workflow.sleep(left)
        try:
            data = await workflow.execute_activity(
                TOOL_ACTIVITY, {"agent": agent.name, "call": planned.model_dump(mode="json")},
                activity_id=f"tool-{planned.turn}.{planned.attempt}.{call.id}",
                start_to_close_timeout=timedelta(
                    seconds=agent.call_timeout(call.name) + agent.timeout_grace),
                heartbeat_timeout=timedelta(seconds=agent.heartbeat_timeout),
                retry_policy=ONE_ATTEMPT)
        except ActivityError as exc:
            lost = isinstance(exc.cause, ActivityTimeoutError)
            error = ToolError(
                "handler_exit", f"tool error ({call.name}): handler_exit: its activity "
                f"{'was lost' if lost else 'failed'}: {exc.cause or exc}",
                tool_name=call.name, tool_call_id=call.id,
                code="worker_lost" if lost else "activity_failed")
            return CallOutcome(call_id=call.id, result=Err(error))
        return CallOutcome(call_id=data["call_id"], result=result_from_json(data["result"]),
                           text=data["text"], writes=data["writes"])

    # -- waiting for answers ---------------------------------------------------------------

    async def _resume(self, suspended: Suspended) -> None:
        """Wait in place until an update answers or completes a waiting call, a question
        expires or a pending call's deadline passes; then resume the machine."""
        machine = self._machine
        assert machine is not None
        now = workflow.now().timestamp()
        machine.date_questions(now)
        for pending in suspended.pending:
            self._parked_at.setdefault(pending.call_id, now)
        waiting = machine.waiting_calls()  # the machine changes only once this returns
        while True:
            now = workflow.now().timestamp()
            answers: dict[str, Any] = {c: self._inbox.pop(c) for c in list(self._inbox)
                                       if c in waiting}
            overdue = [p for p in suspended.pending if p.call_id not in answers
                       and (deadline := self._deadline(p)) is not None and deadline <= now]
            for pending in overdue:
                if pending.on_timeout == "fail_turn":
                    self._take(machine.abort(
                        f"tool call {pending.call_id!r} ({pending.tool}) was not resolved "
                        f"before its deadline (on_timeout='fail_turn')"))
                    return
                answers[pending.call_id] = _pending_timeout(pending)
            if answers:
                self._take(machine.resume(answers, now=now))
                return
            if machine.questions_due(now):
                self._take(machine.expire_questions(now))
                return
            deadlines = [d for d in (*(q.expires_at for q in _questions(machine)),
                                     *(self._deadline(p) for p in suspended.pending))
                         if d is not None]
            timeout = None if not deadlines else timedelta(seconds=max(min(deadlines) - now, 0))
            with contextlib.suppress(TimeoutError):  # a deadline came: look again
                await workflow.wait_condition(
                    lambda: any(c in waiting for c in self._inbox), timeout=timeout)

    def _deadline(self, pending: PendingCall) -> float | None:
        parked = self._parked_at.get(pending.call_id)
        return None if pending.deadline is None or parked is None \
            else parked + pending.deadline

    # -- updates and queries ---------------------------------------------------------------

    @workflow.update(name="answer")
    async def answer(self, call_id: str, answer: Any) -> None:
        """Answer the question of call ``call_id``; returns once the run has taken it."""
        await self._deliver(call_id, answer)

    @answer.validator
    def _check_answer(self, call_id: str, answer: Any) -> None:
        question = next((q for q in _questions(self._machine) if q.call_id == call_id), None)
        if question is None or call_id in self._inbox:
            raise ValueError(f"call {call_id!r} asks no open question; open questions: "
                             f"{[q.call_id for q in _questions(self._machine)]}")
        why = question.refusal(answer)
        if why is not None:
            raise ValueError(why)

    @workflow.update(name="message")
    async def message(self, token: str, text: str) -> str:
        """A front end's message (``start_or_answer``): ``"started"`` when its own
        update-with-start started the run (``text`` was the prompt), else ``"answered"`` once
        the run has taken ``text`` as the answer to its one open question."""
        if token == self._token:
            return "started"
        (question,) = _questions(self._machine)
        await self._deliver(question.call_id, text)
        return "answered"

    @message.validator
    def _check_message(self, token: str, text: str) -> None:
        if token == self._token:
            return
        open_ = _questions(self._machine)
        if len(open_) != 1 or open_[0].call_id in self._inbox:
            raise ValueError(f"the run is running and asks {len(open_)} open questions "
                             f"({[q.call_id for q in open_]}), not one a message can answer; "
                             "answer each by its call id (answer)")
        why = open_[0].refusal(text)
        if why is not None:
            raise ValueError(why)

    @workflow.update(name="complete")
    async def complete(self, call_id: str, result: dict[str, Any],
                       attempt: list[int] | None = None) -> None:
        """Complete the pending (or manual) call ``call_id`` with ``result`` (``{"kind":
        "ok"|"err", "value": ...}``); returns once the run has taken it. ``attempt`` (``[turn,
        attempt]``, from a completion key) must be the one the run waits on."""
        await self._deliver(call_id, result_from_json(result))

    @complete.validator
    def _check_complete(self, call_id: str, result: dict[str, Any],
                        attempt: list[int] | None = None) -> None:
        waiting = _completable(self._machine)
        if call_id not in waiting or call_id in self._inbox:
            raise ValueError(f"call {call_id!r} is not waiting for a completion; waiting: "
                             f"{sorted(waiting)}")
        machine = self._machine
        assert machine is not None
        waits_on = machine.waiting_calls()[call_id]
        if attempt is not None and tuple(attempt) != waits_on:
            raise ValueError(f"the key is for turn {attempt[0]}, attempt {attempt[1]} of call "
                             f"{call_id!r}; the run waits on turn {waits_on[0]}, attempt "
                             f"{waits_on[1]}")
        if not isinstance(result, dict) or result.get("kind") not in ("ok", "err"):
            raise ValueError(f"a completion is {{'kind': 'ok' or 'err', 'value': ...}}, got "
                             f"{result!r}")

    async def _deliver(self, call_id: str, value: Any) -> None:
        """Put an update's answer in the inbox and wait until the run has taken it. Two
        updates for one call validated in the same activation: the first one wins."""
        if call_id in self._inbox:
            raise ApplicationError(f"call {call_id!r} was answered already",
                                   type="UpdateRefused", non_retryable=True)
        self._inbox[call_id] = value
        await workflow.wait_condition(lambda: call_id not in self._inbox)

    @workflow.query(name="questions")
    def questions(self) -> list[dict[str, Any]]:
        """The run's open questions (``Question`` as JSON data), in call order."""
        return [q.model_dump(mode="json") for q in _questions(self._machine)]

    @workflow.query(name="pending")
    def pending(self) -> list[dict[str, Any]]:
        """The run's calls waiting for a completion (``PendingCall`` as JSON data)."""
        machine = self._machine
        done = None if machine is None else machine.outstanding
        if not isinstance(done, Done) or not isinstance(done.outcome, Suspended):
            return []
        return [p.model_dump(mode="json") for p in done.outcome.pending]

    @workflow.query(name="checkpoint")
    def checkpoint(self) -> str | None:
        """The machine's checkpoint as JSON text (``None`` before the run started)."""
        return None if self._machine is None else self._machine.checkpoint().to_json()


def _agent(start: dict[str, Any]) -> TemporalAgent:
    """The run's agent, as this worker has it: a run for another agent, or for one whose
    tools or settings differ, fails once (not retried: a worker would never know it)."""
    name = start.get("agent")
    try:
        agent = agent_named(str(name))
    except UnknownAgentError as exc:
        raise ApplicationError(str(exc), type="UnknownAgentError", non_retryable=True) from exc
    if start.get("fingerprint") != agent.fingerprint:
        raise ApplicationError(
            f"the run was started for agent {name!r} with fingerprint "
            f"{start.get('fingerprint')!r}, but this worker's agent {name!r} has fingerprint "
            f"{agent.fingerprint!r}: their tools or settings differ; give the client and the "
            "workers the same agent", type="AgentMismatchError", non_retryable=True)
    return agent


async def _ask_model(agent: TemporalAgent, effect: LlmCall) -> Response:
    """The model call as an activity; its answer, or its failure for ``on_model_error``."""
    try:
        data = await workflow.execute_activity(
            MODEL_ACTIVITY,
            {"agent": agent.name, "request": effect.request.model_dump(mode="json")},
            activity_id=f"model-{effect.id}",
            start_to_close_timeout=timedelta(seconds=agent.timeouts.model + agent.timeout_grace),
            heartbeat_timeout=timedelta(seconds=agent.heartbeat_timeout),
            retry_policy=ONE_ATTEMPT)
    except ActivityError as exc:
        return NotPerformed(effect.id, ModelError(
            "unavailable", f"the model call's activity failed: {exc.cause or exc}"))
    answer = answer_from_json(data)
    if isinstance(answer, ModelError):
        return NotPerformed(effect.id, answer)
    return ModelReplied(effect.id, answer)


def _questions(machine: TurnMachine | None) -> tuple[Question, ...]:
    """The open questions of a suspended run (none otherwise)."""
    done = None if machine is None else machine.outstanding
    if not isinstance(done, Done) or not isinstance(done.outcome, Suspended):
        return ()
    return done.outcome.questions


def _completable(machine: TurnMachine | None) -> set[str]:
    """The ids of the calls a suspended run waits to complete: pending and manual ones."""
    done = None if machine is None else machine.outstanding
    if not isinstance(done, Done) or not isinstance(done.outcome, Suspended):
        return set()
    outcome = done.outcome
    return {p.call_id for p in outcome.pending} | {m.call_id for m in outcome.manual}


def _pending_timeout(pending: PendingCall) -> HandlerResult:
    """What a pending call gets when its deadline passes (``on_timeout='error_as_result'``)."""
    return Err(ToolError(
        "timeout", f"tool error ({pending.tool}): timeout: the call was not completed within "
        f"its deadline of {pending.deadline} s", tool_name=pending.tool,
        tool_call_id=pending.call_id, cause=pending.deadline, code=PENDING_TIMEOUT_CODE))

