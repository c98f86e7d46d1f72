"""``TurnMachine``: the agent loop as a pure state machine, effects out and responses in.

The machine does no I/O, starts no threads, reads no clock and draws no global randomness: a
host performs its effects and sends back responses by effect id. All of its state is one
``RunState`` owned by the machine (one host thread drives it at a time), so a checkpoint is a
deep copy and a restored machine carries on exactly where the original stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolvisor.call import encode, encode_checked
from toolvisor.contract import (
    AssistantMessage,
    Err,
    HandlerResult,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolError,
)
from toolvisor.machine._checkpoint import (
    CallRecord,
    Checkpoint,
    ModelCallRecord,
    RunState,
    StepRecord,
    check_restorable,
)
from toolvisor.machine._config import MachineConfig
from toolvisor.machine._effects import LlmCall, LogEvent, Progress, Sleep, ToolCalls
from toolvisor.machine._endings import ending
from toolvisor.machine._model_turns import decide_model_failure, failure_text, model_failure
from toolvisor.machine._outcomes import (
    Completed,
    Failed,
    FinalOutcome,
    Halted,
    ModelErrorInfo,
    Question,
)
from toolvisor.machine._planning import (
    close_batch,
    commit_step,
    hand_to_caller,
    plan_batch,
    repeated_ids,
    retries_beside_siblings,
    start_step,
)
from toolvisor.machine._policy import (
    BrokenPolicy,
    CallAttempt,
    ContinueRun,
    RetryAfter,
    apply_policy,
)
from toolvisor.machine._read_side import MachineReadSide, copy_run
from toolvisor.machine._response_checks import (
    check_answers,
    check_outcomes,
    check_response,
    first_messages,
)
from toolvisor.machine._responses import (
    CallOutcome,
    ModelReplied,
    NotPerformed,
    Response,
    ResponseRefused,
    ToolResults,
)
from toolvisor.machine._settling import (
    call_status,
    carry_out,
    date_questions,
    expiry_result,
    record_result,
    refusal,
    spent,
)
from toolvisor.machine._state_view import json_value
from toolvisor.machine._trusted import trusted
from toolvisor.machine._unions import Effect


class TurnMachine(MachineReadSide):
    """The sans-IO agent loop: ``start`` / ``send`` / ``resume`` / ``cancel`` return new effects.

    Each call returns the effects it emitted, in id order; the last one is the effect now waiting
    for a response (``LlmCall``, ``ToolCalls`` or ``Sleep``) or ``Done``. A response with a stale
    or unknown id, or of the wrong type, raises ``ResponseRefused`` and changes nothing.
    """

    def __init__(self, config: MachineConfig) -> None:
        if not isinstance(config, MachineConfig):
            raise TypeError(f"TurnMachine needs a MachineConfig, got {type(config).__name__}")
        self._config = config
        self._run = RunState(mode=config.mode, seed=config.seed)
        self._emitted: list[Effect] = []
        # The records of the outstanding ToolCalls effect still running, by call id: derived
        # from the run state once per effect (never checkpointed), so one-by-one delivery of a
        # batch's outcomes costs O(1) per outcome instead of a scan of every call of the run.
        self._running_index: tuple[int, dict[str, CallRecord]] | None = None

    @classmethod
    def restore(cls, config: MachineConfig, checkpoint: Checkpoint | str | bytes) -> TurnMachine:
        """A machine in exactly the checkpointed state; :meth:`reemit` gives its waiting effect.

        The seed is the checkpoint's (retry jitter replays identically); the mode must match.
        """
        if isinstance(checkpoint, str | bytes):
            run = Checkpoint.from_json(checkpoint).run  # freshly parsed: nobody else holds it
        elif isinstance(checkpoint, Checkpoint):
            run = copy_run(checkpoint.run)
        else:
            raise TypeError(f"restore() takes a Checkpoint or its JSON text, "
                            f"got {type(checkpoint).__name__}")
        machine = cls(config)
        check_restorable(run, config.mode)
        machine._run = run
        return machine

    # -- inputs -------------------------------------------------------------------------------

    def start(
        self, prompt: str | Sequence[Message], *, state: Mapping[str, Any] | None = None
    ) -> list[Effect]:
        """Begin the run with a user prompt (or a whole conversation) and an initial state."""
        run = self._run
        if run.phase != "new":
            raise ResponseRefused("start() was already called on this machine; build a new "
                                  "TurnMachine for a new run")
        messages = first_messages(prompt, self._config.system_prompt)
        initial = json_value(dict(state or {}), "the initial state")
        run.messages = messages
        run.state = initial
        self._emit_llm_call()
        return self._take_emitted()

    def send(self, response: Response) -> list[Effect]:
        """Take the response to the waiting effect; returns the effects that follow."""
        run = self._run
        check_response(run, response)
        prepared = check_outcomes(response, self._running()) \
            if isinstance(response, ToolResults) else []
        if isinstance(response, NotPerformed) and isinstance(response.error, ModelError) \
                and isinstance(run.outstanding, ModelCallRecord):
            self._on_model_error(response.error)
        elif isinstance(response, NotPerformed):
            error = response.error
            text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
            kind = run.outstanding.kind if run.outstanding else "effect"
            self._fail(f"{kind} effect {response.effect_id} failed: {text}")
        elif isinstance(response, ModelReplied):
            self._on_model(response.response)
        elif isinstance(response, ToolResults):
            run.usage = spent(run.usage, response.outcomes)
            running = self._running()
            for record, outcome, writes in prepared:
                run.membership.update(outcome.membership)
                self._on_call_outcome(record, outcome, writes)
                if record.status != "running":
                    del running[record.call.id]
            if not running:
                run.outstanding = None
                run.phase = "between"
                self._advance()
            elif retrying := retries_beside_siblings(run):  # a new effect supersedes this one
                self._emit_tool_calls(run.steps[run.cursor], retrying)
        else:  # Slept: the model call's backoff is over
            self._emit_llm_call(retry=True)
        return self._take_emitted()

    def resume(self, answers: Mapping[str, Any], *, now: float | None = None) -> list[Effect]:
        """Give suspended calls their results: ``{call_id: answer}``; returns what follows.

        An answer is the call's result: ``Ok`` or ``Err`` as given, anything else as
        ``Ok(answer)``; to a question with options, one of them or an ``Err``. An ``Err`` goes
        through the policy (a retry becomes ``continue``: there is nothing to run again).
        ``now`` (host clock) expires the questions due by then: their defaults answer them.
        """
        results = check_answers(self._run, answers)
        return self._answer(results, set() if now is None else set(self.questions_due(now)))

    def date_questions(self, now: float) -> list[Question]:
        """Set the deadline (``now + expires_in``, host clock) of each waiting question that
        has none yet, once (a restart never moves it); returns them, for the host to save."""
        return date_questions(self._run, now)

    def expire_questions(self, now: float) -> list[Effect]:
        """Answer each question of the suspended run whose deadline is ``now`` or earlier by
        its default (a denial, without one, goes through the policy); returns what follows,
        ``[]`` (nothing changed) when no question is due or the run is not suspended."""
        due = set(self.questions_due(now)) if self._run.phase == "suspended" else set()
        return self._answer({}, due) if due else []

    def _answer(self, results: Mapping[str, HandlerResult], due: set[str]) -> list[Effect]:
        """Settle the answered calls and the ``due`` questions (by default: late answers lost)."""
        run = self._run
        run.phase = "between"
        run.done_effect_id = None
        for record in run.calls:
            call = record.call
            result = results.get(call.id)
            if call.id in due and (question := record.question) is not None:
                self._log("info", "question_expired", turn=run.turns, tool_name=call.name,
                          tool_call_id=call.id, expires_at=question.expires_at,
                          default=question.default, late_answer=result is not None)
                result = expiry_result(call, question)
            if result is not None:
                record.question = record.manual = record.pending = None
                result, text = encode_checked(result, tool_name=call.name, tool_call_id=call.id)
                self._settle(record, result, text, answered=True)
        self._advance()
        return self._take_emitted()

    def cancel(self) -> list[Effect]:
        """End the run now with ``Halted(reason="cancelled")``; late responses are refused."""
        run = self._run
        if run.phase in ("new", "done"):
            raise ResponseRefused(f"cancel() needs a started, unfinished run; this one is "
                                  f"{run.phase}")
        run.outstanding = None
        self._commit_current()
        self._finish_halted("cancelled", None)
        return self._take_emitted()

    def abort(self, error: str) -> list[Effect]:
        """End the run now with ``Failed(error)``: the host could not go on with it (its input
        or a callback broke something). Unfinished calls get their closing texts."""
        if self._run.phase in ("new", "done"):
            raise ResponseRefused(f"abort() needs a started, unfinished run; this one is "
                                  f"{self._run.phase}")
        self._fail(error)
        return self._take_emitted()

    def retry_model(self) -> list[Effect]:
        """Try the model again in a run that failed on it: this turn's model call from attempt
        1, with the transcript and tool results the run had. Any other run: ``ResponseRefused``.
        """
        run = self._run
        final = run.final
        if not isinstance(final, Failed) or final.model_error is None:
            raise ResponseRefused(f"retry_model() needs a run that failed on its model call; "
                                  f"this one is {self.status}")
        run.final = None
        run.done_effect_id = None
        run.model_attempt = 1
        self._emit_llm_call(retry=True)
        return self._take_emitted()

    def _running(self) -> dict[str, CallRecord]:
        """The calls of the outstanding effect still running, by id (see ``_running_index``)."""
        effect = self._run.outstanding
        key = effect.id if effect is not None else 0
        if self._running_index is None or self._running_index[0] != key:
            self._running_index = (key, {r.call.id: r for r in self._run.calls
                                         if r.status == "running"})
        return self._running_index[1]

    # -- the loop -----------------------------------------------------------------------------

    def _on_model(self, response: ModelResponse) -> None:
        run = self._run
        run.outstanding = None
        run.phase = "between"
        response = ModelResponse.model_validate_json(response.model_dump_json())
        if repeated := repeated_ids(response):
            self._fail(f"the model returned tool call id(s) {repeated} more than once in one "
                       "response; its message was not recorded")
            return
        if response.usage is not None:
            run.usage += response.usage
        self._progress("model_replied", turn=run.turns, attempt=run.model_attempt,
                       model=response.model, response_id=response.response_id,
                       finish_reason=response.finish_reason,
                       usage=response.usage.model_dump() if response.usage else None)
        run.messages.append(trusted(AssistantMessage, role="assistant", content=response.text,
                                    tool_calls=response.tool_calls))
        if not response.tool_calls:
            self._finish(ending(Completed, run, text=response.text,
                                finish_reason=response.finish_reason))
            return
        if response.finish_reason == "length":
            self._log("warning", "model_output_truncated", turn=run.turns,
                      call_ids=[c.id for c in response.tool_calls])
        plan_batch(run, self._config, response)
        for record in run.calls:
            if record.step < 0 and record.status == "queued":  # it cannot run
                error = refusal(record, self._config, run.membership)
                self._settle(record, Err(error), encode(Err(error)), answered=False)
        self._advance()

    def _advance(self) -> None:
        """Emit the next waiting effect (or ``Done``) once nothing is running."""
        run = self._run
        blocks = self._config.mode != "parallel_streaming"
        while True:
            halting = [r.halt for r in run.calls if r.halt is not None]
            if halting:
                self._commit_current()
                self._finish_halted(halting[0].reason, halting[0].result)
                return
            if blocks and any(r.status == "suspended" and r.step < run.cursor
                              for r in run.calls):
                self._suspend()
                return
            if run.cursor < len(run.steps):
                step = run.steps[run.cursor]
                records = [run.calls[i] for i in step.calls]
                queued = [r for r in records if r.status in ("queued", "retry_wait")]
                if queued and step.manual:
                    for record, error in hand_to_caller(run, self._config, queued):
                        self._settle(record, error, encode(error), answered=True)
                elif queued:
                    self._emit_tool_calls(step, queued)
                    return
                self._commit(step)
                run.cursor += 1
                continue
            if any(r.status == "suspended" for r in run.calls):
                self._suspend()
                return
            close_batch(run, "")
            if run.turns >= self._config.max_turns:
                self._finish(ending(Halted, run, reason="max_turns"))
                return
            self._emit_llm_call()
            return

    # -- call outcomes ------------------------------------------------------------------------

    def _on_call_outcome(self, record: CallRecord, outcome: CallOutcome,
                         writes: dict[str, Any]) -> None:
        result, text = outcome.result, outcome.text
        if text is None:
            result, text = encode_checked(result, tool_name=record.call.name,
                                          tool_call_id=record.call.id)
        record.writes = writes
        self._settle(record, result, text, answered=False)

    def _settle(self, record: CallRecord, result: HandlerResult, text: str, *,
                answered: bool) -> None:
        """Record what one call (or its answer) came back with; failures go to the policy."""
        failure = record_result(record, result, text, turn=self._run.turns)
        if failure is not None:
            self._on_failure(record, *failure, answered=answered)
        call = record.call
        self._progress("call_finished", call_id=call.id, tool=call.name,
                       attempt=record.attempt, status=call_status(record), answered=answered)

    def _on_failure(self, record: CallRecord, error: Any, text: str, *, answered: bool) -> None:
        """Consult the call's policy exactly once and carry out its decision."""
        call, run = record.call, self._run
        failed = CallAttempt(call=call, attempt=record.attempt, retryable=record.retryable,
                            known=record.known)
        decision = apply_policy(self._config.policy_for(call.name), failed, error, seed=run.seed)
        if isinstance(decision, RetryAfter) and (
                answered or record.step < 0 or record.attempt >= self._config.max_call_attempts):
            why = "answered from outside" if answered else "its arguments cannot run" \
                if record.step < 0 else "max_call_attempts reached"
            self._log("info", "retry_not_possible", turn=self._run.turns,
                      tool_name=call.name, tool_call_id=call.id, attempt=record.attempt, why=why)
            decision = ContinueRun()
        self._log("info", "tool_failed", turn=self._run.turns, tool_name=call.name,
                  tool_call_id=call.id, attempt=record.attempt,
                  crashed=isinstance(error, ToolError),
                  reason=error.reason if isinstance(error, ToolError) else None,
                  decision=type(decision).__name__)
        if isinstance(decision, BrokenPolicy):
            self._log("error", "policy_failed", turn=self._run.turns, tool_name=call.name,
                      tool_call_id=call.id, attempt=record.attempt, detail=decision.detail)
        carry_out(record, decision, error, text)

    # -- state --------------------------------------------------------------------------------

    def _commit_current(self) -> None:
        run = self._run
        if run.cursor < len(run.steps):
            self._commit(run.steps[run.cursor])

    def _commit(self, step: StepRecord) -> None:
        """Apply a settled step's writes; every conflict is logged and reported as progress."""
        for conflict in commit_step(self._run, step):
            fields = {"key": conflict.key, "kept_call_id": conflict.kept_call_id,
                      "dropped_call_id": conflict.dropped_call_id}
            self._log("warning", "state_write_conflict", **fields)
            self._progress("state_conflict", **fields)

    # -- endings ------------------------------------------------------------------------------

    def _finish_halted(self, reason: str, result: Any) -> None:
        run = self._run
        close_batch(run, f"the run halted ({reason})")
        self._finish(ending(Halted, run, reason=reason, result=result))

    def _fail(self, error: str, *, model_error: ModelErrorInfo | None = None) -> None:
        run = self._run
        run.outstanding = None
        self._commit_current()
        close_batch(run, "the run failed")
        self._finish(ending(Failed, run, error=error, model_error=model_error))

    def _finish(self, final: FinalOutcome) -> None:
        run = self._run
        run.outstanding = None
        run.final = final  # built with the run's usage: no copy to set it
        self._log("info", "run_finished", outcome=final.kind,
                  reason=final.reason if isinstance(final, Halted) else None, turns=run.turns)
        run.phase = "done"
        run.done_effect_id = self._next_id()
        self._emitted.append(self._done_effect())

    def _suspend(self) -> None:
        run = self._run
        waiting = [r.call.id for r in run.calls if r.status == "suspended"]
        self._log("info", "run_suspended", call_ids=waiting)
        run.phase = "suspended"
        run.done_effect_id = self._next_id()
        self._emitted.append(self._done_effect())

    # -- emitting -----------------------------------------------------------------------------

    def _next_id(self) -> int:
        effect_id = self._run.next_effect_id
        self._run.next_effect_id += 1
        return effect_id

    def _take_emitted(self) -> list[Effect]:
        emitted, self._emitted = self._emitted, []
        return emitted

    def _progress(self, event: str, **data: Any) -> None:
        self._emitted.append(trusted(Progress, kind="progress", id=self._next_id(), event=event,
                                     data=data))

    def _log(self, level: Any, event: str, **fields: Any) -> None:
        self._emitted.append(trusted(LogEvent, kind="log", id=self._next_id(), level=level,
                                     event=event, fields=fields))

    def _emit_llm_call(self, *, retry: bool = False) -> None:
        """Ask the model: the next turn, or this turn's call again (``retry``)."""
        run = self._run
        if retry:
            self._progress("model_retry", turn=run.turns, attempt=run.model_attempt)
        else:
            run.turns += 1
            run.model_attempt = 1
            self._progress("turn_started", turn=run.turns)
        request = trusted(ModelRequest, messages=tuple(run.messages),  # validated parts
                          tools=self._config.tool_specs, attempt=run.model_attempt, model=None)
        effect = trusted(LlmCall, kind="llm_call", id=self._next_id(), turn=run.turns,
                         request=request, attempt=run.model_attempt)
        self._wait(effect, "awaiting_model")

    def _on_model_error(self, error: ModelError) -> None:
        """Consult ``on_model_error`` once: sleep before the next attempt, or fail the run."""
        run = self._run
        error, decision = decide_model_failure(self._config, run, error)
        self._log("warning", "model_call_failed", turn=run.turns, attempt=error.attempt,
                  reason=error.reason, error=error.message, decision=type(decision).__name__)
        self._progress("model_failed", turn=run.turns, attempt=error.attempt,
                       reason=error.reason, error=error.message)
        if isinstance(decision, RetryAfter):
            run.model_attempt += 1
            self._log("info", "model_retry_scheduled", turn=run.turns,
                      attempt=run.model_attempt, seconds=decision.delay)
            self._wait(Sleep(id=self._next_id(), seconds=decision.delay), "sleeping")
            return
        self._fail(failure_text(error, decision), model_error=model_failure(error, decision))

    def _emit_tool_calls(self, step: StepRecord, records: list[CallRecord]) -> None:
        """Start ``records`` (queued calls, and retries with their backoff) in a new effect."""
        for record in records:
            if record.status == "retry_wait":
                self._log("info", "retry_scheduled", turn=self._run.turns,
                          call_ids=[record.call.id], seconds=record.retry_delay)
        effect_id = self._next_id()
        effect = trusted(ToolCalls, kind="tool_calls", id=effect_id,
                         calls=start_step(self._run, step, records, effect_id))
        self._wait(effect, "awaiting_tools")

    def _wait(self, effect: LlmCall | ToolCalls | Sleep, phase: Any) -> None:
        self._run.outstanding = (
            ModelCallRecord(id=effect.id, turn=effect.turn, tools=effect.request.tools,
                            attempt=effect.attempt)
            if isinstance(effect, LlmCall) else effect
        )
        self._run.phase = phase
        self._emitted.append(effect)

