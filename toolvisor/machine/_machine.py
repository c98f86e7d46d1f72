"""``TurnMachine``: the agent loop as a pure state machine, effects out and responses in.

The machine does no I/O, starts no threads, reads no clock and draws no global randomness: a
host performs its effects and sends back responses by effect id. All of its state is one
``RunState`` owned by the machine (one host thread drives it at a time), so a checkpoint is a
deep copy and a restored machine carries on exactly where the original stopped.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from toolvisor.contract import (
    LEGAL_RESULT_TYPES,
    AskUser,
    AssistantMessage,
    Err,
    Halt,
    HandlerResult,
    InvalidArguments,
    Message,
    ModelRequest,
    ModelResponse,
    Ok,
    Pending,
    SystemMessage,
    ToolError,
    ToolResultMessage,
    UserMessage,
)
from toolvisor.executor import encode, encode_checked
from toolvisor.machine._checkpoint import (
    CallRecord,
    Checkpoint,
    HaltRecord,
    ModelCallRecord,
    RunState,
    StepRecord,
    Suspended,
    check_restorable,
)
from toolvisor.machine._config import MachineConfig
from toolvisor.machine._done import Done, Effect
from toolvisor.machine._effects import (
    CallToRun,
    LlmCall,
    LogEvent,
    Progress,
    Sleep,
    ToolCalls,
)
from toolvisor.machine._outcomes import (
    Completed,
    Failed,
    FinalOutcome,
    Halted,
    PendingCall,
    Question,
    StateConflict,
)
from toolvisor.machine._responses import (
    CallOutcome,
    EffectFailed,
    ModelReplied,
    Response,
    ResponseRefused,
    Slept,
    ToolResults,
)
from toolvisor.machine._state_view import json_value
from toolvisor.machine.policy import (
    Continue,
    Decision,
    FailedCall,
    HaltRun,
    PolicyFailed,
    RetryAfter,
    decide,
)

RESERVED_HALT_REASONS: frozenset[str] = frozenset(
    {"ask_user", "max_turns", "tool_error", "cancelled", "completed", "invalid_return"}
)
"""Halt reasons the runtime uses itself; a handler's ``Halt`` with one is ``invalid_return``."""

_EXPECTED: dict[str, type] = {"llm_call": ModelReplied, "tool_calls": ToolResults, "sleep": Slept}
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def _copy_run(run: RunState) -> RunState:
    """A deep copy that shares the messages: they are frozen, and most of a long run's size."""
    memo: dict[int, Any] = {id(message): message for message in run.messages}
    return copy.deepcopy(run, memo)


def _jsonable(value: Any) -> Any:
    """A JSON form of ``value`` for outcomes and checkpoints (``repr`` as a last resort)."""
    if isinstance(value, ToolError | InvalidArguments):
        return value.for_model()
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": str(value)}
    try:
        return to_jsonable_python(value)
    except Exception:
        return repr(value)


def _unresolved_text(reason: str, message: str) -> str:
    return encode(Err({"reason": reason, "message": message}))


class TurnMachine:
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
            run = _copy_run(checkpoint.run)
        else:
            raise TypeError(f"restore() takes a Checkpoint or its JSON text, "
                            f"got {type(checkpoint).__name__}")
        machine = cls(config)
        check_restorable(run, config.mode)
        machine._run = run
        return machine

    # -- inspection ---------------------------------------------------------------------------

    @property
    def config(self) -> MachineConfig:
        return self._config

    @property
    def finished(self) -> bool:
        """Whether the run is over (suspended runs are not: they wait for ``resume``)."""
        return self._run.phase == "done"

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the run's committed state."""
        return copy.deepcopy(self._run.state)

    @property
    def outstanding(self) -> Effect | None:
        """The effect waiting for a response, or the ``Done`` effect; ``None`` before ``start``.

        For a partly answered ``ToolCalls`` only the calls still running are listed, each as
        first emitted.
        """
        run = self._run
        if run.phase in ("suspended", "done"):
            return self._done_effect()
        effect = run.outstanding
        if isinstance(effect, ModelCallRecord):
            return LlmCall(id=effect.id, turn=effect.turn,
                           request=ModelRequest(messages=tuple(run.messages), tools=effect.tools))
        if isinstance(effect, ToolCalls):
            running = {r.call.id for r in run.calls if r.status == "running"}
            calls = tuple(c for c in effect.calls if c.call.id in running)
            if len(calls) != len(effect.calls):
                return effect.model_copy(update={"calls": calls})
        return effect

    def reemit(self) -> list[Effect]:
        """The outstanding effect again (after a restore), same id and payload; ``[]`` if none."""
        effect = self.outstanding
        return [] if effect is None else [effect]

    def checkpoint(self) -> Checkpoint:
        """The whole state as versioned JSON-able data (``to_json()``); never pickled."""
        return Checkpoint(run=_copy_run(self._run))

    # -- inputs -------------------------------------------------------------------------------

    def start(
        self, prompt: str | Sequence[Message], *, state: Mapping[str, Any] | None = None
    ) -> list[Effect]:
        """Begin the run with a user prompt (or a whole conversation) and an initial state."""
        run = self._run
        if run.phase != "new":
            raise ResponseRefused("start() was already called on this machine; build a new "
                                  "TurnMachine for a new run")
        messages = self._first_messages(prompt)
        initial = json_value(dict(state or {}), "the initial state")
        run.messages = messages
        run.state = initial
        self._emit_llm_call()
        return self._take_emitted()

    def send(self, response: Response) -> list[Effect]:
        """Take the response to the waiting effect; returns the effects that follow."""
        prepared = self._check_response(response)
        run = self._run
        if isinstance(response, EffectFailed):
            error = response.error
            text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
            kind = run.outstanding.kind if run.outstanding else "effect"
            self._fail(f"{kind} effect {response.effect_id} failed: {text}")
        elif isinstance(response, ModelReplied):
            self._on_model(response.response)
        elif isinstance(response, ToolResults):
            running = self._running()
            for record, outcome, writes in prepared:
                self._on_call_outcome(record, outcome, writes)
                if record.status != "running":
                    del running[record.call.id]
            if not running:
                run.outstanding = None
                run.phase = "between"
                self._advance()
        else:
            run.outstanding = None
            run.phase = "between"
            for record in run.calls:
                if record.status == "retry_wait":
                    record.status = "queued"
                    record.attempt += 1
                    record.retry_delay = None
            self._advance()
        return self._take_emitted()

    def resume(self, answers: Mapping[str, Any]) -> list[Effect]:
        """Give suspended calls their results: ``{call_id: answer}``; returns what follows.

        An answer is the call's result: ``Ok`` or ``Err`` as given, anything else as
        ``Ok(answer)``. An ``Err`` goes through the policy (a retry becomes ``continue``: the
        result came from outside, there is nothing to run again).
        """
        run = self._run
        if run.phase != "suspended":
            raise ResponseRefused(f"resume() needs a suspended run; this one is {run.phase}")
        if not isinstance(answers, Mapping) or not answers:
            raise ResponseRefused("resume() takes a non-empty mapping of call id -> answer")
        waiting = {r.call.id: r for r in run.calls if r.status == "suspended"}
        unknown = [key for key in answers if key not in waiting]
        if unknown:
            raise ResponseRefused(f"call(s) {unknown} are not waiting for an answer; waiting: "
                                  f"{list(waiting)}")
        results: dict[str, HandlerResult] = {}
        for call_id, answer in answers.items():
            if isinstance(answer, AskUser | Halt | Pending):
                raise ResponseRefused(f"the answer for call {call_id!r} is a "
                                      f"{type(answer).__name__}; answer with a value, Ok or Err")
            results[call_id] = answer if isinstance(answer, Ok | Err) else Ok(answer)
        run.phase = "between"
        run.done_effect_id = None
        for record in run.calls:
            if record.call.id in results:
                record.question = None
                record.pending = None
                result, text = encode_checked(results[record.call.id],
                                              tool_name=record.call.name,
                                              tool_call_id=record.call.id)
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

    # -- response checks ----------------------------------------------------------------------

    def _check_response(
        self, response: object
    ) -> list[tuple[CallRecord, CallOutcome, dict[str, Any]]]:
        run = self._run
        if not isinstance(response, ModelReplied | ToolResults | Slept | EffectFailed):
            raise ResponseRefused(f"send() takes ModelReplied, ToolResults, Slept or "
                                  f"EffectFailed, got {type(response).__name__}")
        if run.phase == "new":
            raise ResponseRefused("the run has not started: call start(prompt) first")
        if run.phase == "suspended":
            raise ResponseRefused(f"the run is suspended (effect {run.done_effect_id}); give "
                                  "the answers with resume()")
        effect = run.outstanding
        if run.phase == "done" or effect is None:
            raise ResponseRefused(f"the run is over (effect {run.done_effect_id}); response "
                                  f"for effect {response.effect_id} refused")
        if response.effect_id != effect.id:
            known = "stale" if response.effect_id < effect.id else "unknown"
            raise ResponseRefused(f"{known} effect id {response.effect_id}: the machine waits "
                                  f"for effect {effect.id} ({effect.kind})")
        expected = _EXPECTED[effect.kind]
        if not isinstance(response, expected | EffectFailed):
            raise ResponseRefused(f"effect {effect.id} is a {effect.kind}; answer it with "
                                  f"{expected.__name__} or EffectFailed, not "
                                  f"{type(response).__name__}")
        if isinstance(response, ModelReplied) and not isinstance(response.response,
                                                                 ModelResponse):
            raise ResponseRefused(f"ModelReplied.response must be a ModelResponse, got "
                                  f"{type(response.response).__name__}")
        if isinstance(response, ToolResults):
            return self._check_outcomes(response)
        return []

    def _check_outcomes(
        self, response: ToolResults
    ) -> list[tuple[CallRecord, CallOutcome, dict[str, Any]]]:
        if not response.outcomes:
            raise ResponseRefused(f"ToolResults for effect {response.effect_id} has no outcomes")
        running = self._running()
        seen: set[str] = set()
        prepared = []
        for outcome in response.outcomes:
            if not isinstance(outcome, CallOutcome):
                raise ResponseRefused(f"ToolResults.outcomes holds CallOutcome objects, got "
                                      f"{type(outcome).__name__}")
            record = running.get(outcome.call_id)
            if record is None or outcome.call_id in seen:
                raise ResponseRefused(
                    f"call {outcome.call_id!r} is not running in effect {response.effect_id} "
                    f"(unknown, already answered or repeated); running: {list(running)}")
            seen.add(outcome.call_id)
            if not isinstance(outcome.result, LEGAL_RESULT_TYPES):
                raise ResponseRefused(f"the result for call {outcome.call_id!r} is a "
                                      f"{type(outcome.result).__name__}, not a handler result")
            if outcome.text is not None and not isinstance(outcome.text, str):
                raise ResponseRefused(f"the text for call {outcome.call_id!r} must be a str")
            try:
                writes = json_value(dict(outcome.writes), f"the writes of call "
                                                          f"{outcome.call_id!r}")
            except (TypeError, ValueError) as exc:
                raise ResponseRefused(str(exc)) from exc
            prepared.append((record, outcome, writes))
        return prepared

    def _running(self) -> dict[str, CallRecord]:
        effect = self._run.outstanding
        key = effect.id if effect is not None else 0
        if self._running_index is None or self._running_index[0] != key:
            self._running_index = (key, {r.call.id: r for r in self._run.calls
                                         if r.status == "running"})
        return self._running_index[1]

    # -- the loop -----------------------------------------------------------------------------

    def _first_messages(self, prompt: str | Sequence[Message]) -> list[Message]:
        system = self._config.system_prompt
        if isinstance(prompt, str):
            head: list[Message] = [SystemMessage(content=system)] if system else []
            return [*head, UserMessage(content=prompt)]
        try:
            messages = _MESSAGES.validate_python(list(prompt))
        except (TypeError, ValidationError) as exc:
            raise TypeError(f"start() takes a prompt str or a sequence of messages: {exc}") \
                from exc
        if not messages:
            raise ValueError("start() needs a prompt: the message sequence is empty")
        if system and not isinstance(messages[0], SystemMessage):
            messages.insert(0, SystemMessage(content=system))
        return messages

    def _on_model(self, response: ModelResponse) -> None:
        run = self._run
        run.outstanding = None
        run.phase = "between"
        response = ModelResponse.model_validate_json(response.model_dump_json())
        ids = [c.id for c in response.tool_calls]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            self._fail(f"the model returned tool call id(s) {repeated} more than once in one "
                       "response; its message was not recorded")
            return
        run.messages.append(AssistantMessage(content=response.text,
                                             tool_calls=response.tool_calls))
        if not response.tool_calls:
            self._finish(Completed(text=response.text, messages=tuple(run.messages),
                                   turns=run.turns, state=run.state,
                                   state_conflicts=tuple(run.conflicts)))
            return
        self._plan_batch(response)
        for record in run.calls:
            if not record.known:
                error = ToolError(
                    "not_found",
                    f"tool error ({record.call.name}): not_found: the model named tool "
                    f"{record.call.name!r}, which is not in the catalog; known tools: "
                    f"{[t.name for t in self._config.tools]}",
                    tool_name=record.call.name, tool_call_id=record.call.id)
                self._settle(record, Err(error), encode(Err(error)), answered=False)
        self._advance()

    def _plan_batch(self, response: ModelResponse) -> None:
        """Group the calls into steps: parallel ones together first, then each serial one."""
        run = self._run
        config = self._config
        run.calls = []
        for call in response.tool_calls:
            tool = config.tool_named(call.name)
            run.calls.append(CallRecord(call=call, step=-1, known=tool is not None,
                                        retryable=tool is not None and tool.retryable))
        known = [i for i, r in enumerate(run.calls) if r.known]
        if config.mode == "sequential":
            groups = [[i] for i in known]
        else:
            parallel = [i for i in known
                        if _scheduling(config, run.calls[i].call.name) == "parallel"]
            serial = [[i] for i in known if i not in parallel]
            groups = ([parallel] if parallel else []) + serial
        run.steps = [StepRecord(calls=group) for group in groups]
        run.cursor = 0
        for index, group in enumerate(groups):
            for i in group:
                run.calls[i].step = index

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
                waiting = [r for r in records if r.status == "retry_wait"]
                if waiting:
                    self._emit_sleep(waiting)
                    return
                queued = [r for r in records if r.status == "queued"]
                if queued:
                    self._emit_tool_calls(step, queued)
                    return
                self._commit(step)
                run.cursor += 1
                continue
            if any(r.status == "suspended" for r in run.calls):
                self._suspend()
                return
            self._close_batch("")
            if run.turns >= self._config.max_turns:
                self._finish(Halted(reason="max_turns", messages=tuple(run.messages),
                                    turns=run.turns, state=run.state,
                                    state_conflicts=tuple(run.conflicts)))
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
        call = record.call
        match result:
            case Ok():
                self._resolve(record, text, is_error=False)
            case Err(reason):
                self._on_failure(record, reason, text, answered=answered)
            case AskUser(question, options):
                record.status = "suspended"
                record.question = Question(call_id=call.id, tool=call.name, question=question,
                                           options=options)
            case Pending(deadline, on_timeout, on_cancel):
                record.status = "suspended"
                record.pending = PendingCall(call_id=call.id, tool=call.name, deadline=deadline,
                                             on_timeout=on_timeout, on_cancel=on_cancel)
            case Halt(reason, value) if reason in RESERVED_HALT_REASONS:
                error = ToolError(
                    "invalid_return",
                    f"tool error ({call.name}): invalid_return: Halt reason {reason!r} is "
                    f"reserved by the runtime ({sorted(RESERVED_HALT_REASONS)}); use another",
                    tool_name=call.name, tool_call_id=call.id, cause=reason)
                self._on_failure(record, error, encode(Err(error)), answered=answered)
            case Halt(reason, value):
                self._resolve(record, text, is_error=False)
                record.halt = HaltRecord(reason=reason, result=_jsonable(value))
        self._progress("call_finished", call_id=call.id, tool=call.name,
                       attempt=record.attempt, status=_status(record), answered=answered)

    def _resolve(self, record: CallRecord, text: str, *, is_error: bool) -> None:
        record.status = "done"
        record.text = text
        record.is_error = is_error

    def _on_failure(self, record: CallRecord, error: Any, text: str, *, answered: bool) -> None:
        """Consult the call's policy exactly once and carry out its decision."""
        call = record.call
        failed = FailedCall(call=call, attempt=record.attempt, retryable=record.retryable,
                            known=record.known)
        decision: Decision = decide(self._config.policy_for(call.name), failed, error,
                                    seed=self._run.seed)
        if isinstance(decision, RetryAfter) and (
                answered or record.attempt >= self._config.max_call_attempts):
            self._log("info", "retry_not_possible", call_id=call.id, tool=call.name,
                      attempt=record.attempt,
                      why="answered from outside" if answered else "max_call_attempts reached")
            decision = Continue()
        self._log("info", "tool_failed", call_id=call.id, tool=call.name,
                  attempt=record.attempt, crashed=isinstance(error, ToolError),
                  reason=error.reason if isinstance(error, ToolError) else None,
                  decision=type(decision).__name__)
        match decision:
            case Continue(None):
                self._resolve(record, text, is_error=True)
            case Continue(Ok() | Err() as replacement):
                result, replaced = encode_checked(replacement, tool_name=call.name,
                                                  tool_call_id=call.id)
                self._resolve(record, replaced, is_error=isinstance(result, Err))
            case HaltRun(result):
                self._resolve(record, text, is_error=True)
                record.halt = HaltRecord(reason="tool_error", result=(
                    _jsonable(result) if result is not None else
                    {"tool_call_id": call.id, "tool": call.name, "error": _jsonable(error)}))
            case RetryAfter(delay):
                record.status = "retry_wait"
                record.text = text
                record.is_error = True
                record.retry_delay = float(delay)
                record.writes = {}
            case PolicyFailed(detail):
                self._log("error", "policy_failed", call_id=call.id, tool=call.name,
                          detail=detail)
                self._resolve(record, text, is_error=True)
                record.halt = HaltRecord(reason="invalid_return", result={
                    "tool_call_id": call.id, "tool": call.name, "detail": detail})

    # -- state --------------------------------------------------------------------------------

    def _commit_current(self) -> None:
        run = self._run
        if run.cursor < len(run.steps):
            self._commit(run.steps[run.cursor])

    def _commit(self, step: StepRecord) -> None:
        """Apply a settled step's writes in call order; a second writer of a key is dropped."""
        run = self._run
        if step.committed or step.snapshot is None:
            step.committed = True
            return
        step.committed = True
        writers: dict[str, str] = {}
        for record in (run.calls[i] for i in step.calls):
            for key, value in record.writes.items():
                first = writers.get(key)
                if first is None:
                    writers[key] = record.call.id
                    run.state[key] = value
                    continue
                run.conflicts.append(StateConflict(key=key, kept_call_id=first,
                                                   dropped_call_id=record.call.id,
                                                   turn=run.turns))
                record.notes.append(
                    f"[toolvisor: this call's write to state key {key!r} was discarded: call "
                    f"{first!r}, earlier in the same parallel step, wrote it first]")
                self._log("warning", "state_write_conflict", key=key, kept_call_id=first,
                          dropped_call_id=record.call.id)
                self._progress("state_conflict", key=key, kept_call_id=first,
                               dropped_call_id=record.call.id)

    # -- endings ------------------------------------------------------------------------------

    def _close_batch(self, why: str) -> None:
        """Append one result message per call of the batch, in the order the model asked."""
        run = self._run
        for record in run.calls:
            text, is_error = record.text, record.is_error
            if record.status == "queued":
                text, is_error = _unresolved_text("not_run", f"not run: {why}"), True
            elif record.status == "running":
                text, is_error = _unresolved_text("not_completed",
                                                  f"did not complete: {why}"), True
            elif record.status == "suspended":
                text, is_error = _unresolved_text("not_answered", f"no answer: {why}"), True
            content = "\n".join([text or "", *record.notes])
            run.messages.append(ToolResultMessage(tool_call_id=record.call.id,
                                                  name=record.call.name, content=content,
                                                  is_error=is_error))
        run.calls = []
        run.steps = []
        run.cursor = 0

    def _finish_halted(self, reason: str, result: Any) -> None:
        run = self._run
        self._close_batch(f"the run halted ({reason})")
        self._finish(Halted(reason=reason, result=result, messages=tuple(run.messages),
                            turns=run.turns, state=run.state,
                            state_conflicts=tuple(run.conflicts)))

    def _fail(self, error: str) -> None:
        run = self._run
        run.outstanding = None
        self._commit_current()
        self._close_batch("the run failed")
        self._finish(Failed(error=error, messages=tuple(run.messages), turns=run.turns,
                            state=run.state, state_conflicts=tuple(run.conflicts)))

    def _finish(self, final: FinalOutcome) -> None:
        run = self._run
        run.outstanding = None
        run.final = final
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

    def _done_effect(self) -> Done:
        run = self._run
        assert run.done_effect_id is not None
        outcome = run.final if run.final is not None else self._suspended()
        return Done(id=run.done_effect_id, outcome=outcome)

    def _suspended(self) -> Suspended:
        calls = [r for r in self._run.calls if r.status == "suspended"]
        return Suspended(
            questions=tuple(r.question for r in calls if r.question is not None),
            pending=tuple(r.pending for r in calls if r.pending is not None),
            checkpoint=self.checkpoint(),
        )

    # -- emitting -----------------------------------------------------------------------------

    def _next_id(self) -> int:
        effect_id = self._run.next_effect_id
        self._run.next_effect_id += 1
        return effect_id

    def _take_emitted(self) -> list[Effect]:
        emitted, self._emitted = self._emitted, []
        return emitted

    def _progress(self, event: str, **data: Any) -> None:
        self._emitted.append(Progress(id=self._next_id(), event=event, data=data))

    def _log(self, level: Any, event: str, **fields: Any) -> None:
        self._emitted.append(LogEvent(id=self._next_id(), level=level, event=event,
                                      fields=fields))

    def _emit_llm_call(self) -> None:
        run = self._run
        run.turns += 1
        self._progress("turn_started", turn=run.turns)
        effect = LlmCall(id=self._next_id(), turn=run.turns,
                         request=ModelRequest(messages=tuple(run.messages),
                                              tools=self._config.tool_specs))
        self._wait(effect, "awaiting_model")

    def _emit_tool_calls(self, step: StepRecord, records: list[CallRecord]) -> None:
        if step.snapshot is None:
            step.snapshot = copy.deepcopy(self._run.state)
        for record in records:
            record.status = "running"
        effect = ToolCalls(id=self._next_id(), calls=tuple(
            CallToRun(call=r.call, attempt=r.attempt, state=step.snapshot) for r in records))
        self._wait(effect, "awaiting_tools")

    def _emit_sleep(self, records: list[CallRecord]) -> None:
        seconds = max(r.retry_delay or 0.0 for r in records)
        call_ids = tuple(r.call.id for r in records)
        self._log("info", "retry_scheduled", call_ids=list(call_ids), seconds=seconds)
        self._wait(Sleep(id=self._next_id(), seconds=seconds, call_ids=call_ids), "sleeping")

    def _wait(self, effect: LlmCall | ToolCalls | Sleep, phase: Any) -> None:
        self._run.outstanding = (
            ModelCallRecord(id=effect.id, turn=effect.turn, tools=effect.request.tools)
            if isinstance(effect, LlmCall) else effect
        )
        self._run.phase = phase
        self._emitted.append(effect)


def _scheduling(config: MachineConfig, name: str) -> str:
    tool = config.tool_named(name)
    return tool.scheduling if tool is not None else "parallel"


def _status(record: CallRecord) -> str:
    if record.status == "done":
        if record.halt is not None:
            return "halt"
        return "error" if record.is_error else "ok"
    return "retry" if record.status == "retry_wait" else record.status
