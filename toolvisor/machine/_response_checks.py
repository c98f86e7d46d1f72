"""What a ``TurnMachine`` accepts from its host, checked before anything changes.

A prompt for ``start``, a response for ``send`` and answers for ``resume`` are checked here as
plain functions over the run state; a refusal raises (``ResponseRefused`` for responses and
answers) and leaves the run as it was. ``answers_for`` reads a user's answer to a
``Suspended`` (a value, or a mapping by call id) before any of that, with a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import TypeAdapter, ValidationError

from toolvisor.contract import (
    LEGAL_RESULT_TYPES,
    AskUser,
    Err,
    Halt,
    HandlerResult,
    Message,
    ModelResponse,
    Ok,
    Pending,
    SystemMessage,
    UserMessage,
)
from toolvisor.machine._checkpoint import CallRecord, Mode, RunState, Suspended
from toolvisor.machine._responses import (
    CallOutcome,
    ModelReplied,
    NotPerformed,
    ResponseRefused,
    Slept,
    ToolResults,
)
from toolvisor.machine._state_view import json_value

Prepared: TypeAlias = tuple[CallRecord, CallOutcome, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Relayed:
    """The answer a host gives a call that relayed a child session's question: what the child
    did with the user's answer, taken as the call's result as it is (the child checked the
    answer against the options). An ``AskUser`` (the child asks again) keeps the call
    suspended on that question; a user's own answer is never one."""

    result: Ok | Err | AskUser
"""A checked outcome: the running call's record, the outcome and its writes as JSON values."""

_EXPECTED: dict[str, type] = {"llm_call": ModelReplied, "tool_calls": ToolResults, "sleep": Slept}
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def first_messages(prompt: str | Sequence[Message], system_prompt: str | None) -> list[Message]:
    """The conversation a run starts with: the prompt, after the system prompt if it lacks one."""
    if isinstance(prompt, str):
        head: list[Message] = [SystemMessage(content=system_prompt)] if system_prompt else []
        return [*head, UserMessage(content=prompt)]
    try:
        messages = _MESSAGES.validate_python(list(prompt))
    except (TypeError, ValidationError) as exc:
        raise TypeError(f"start() takes a prompt str or a sequence of messages: {exc}") from exc
    if not messages:
        raise ValueError("start() needs a prompt: the message sequence is empty")
    if system_prompt and not isinstance(messages[0], SystemMessage):
        messages.insert(0, SystemMessage(content=system_prompt))
    return messages


def check_response(run: RunState, response: object) -> None:
    """Refuse a response that is not for the waiting effect or not of its type."""
    if not isinstance(response, ModelReplied | ToolResults | Slept | NotPerformed):
        raise ResponseRefused(f"send() takes ModelReplied, ToolResults, Slept or "
                              f"NotPerformed, got {type(response).__name__}")
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
    if not isinstance(response, expected | NotPerformed):
        raise ResponseRefused(f"effect {effect.id} is a {effect.kind}; answer it with "
                              f"{expected.__name__} or NotPerformed, not "
                              f"{type(response).__name__}")
    if isinstance(response, ModelReplied) and not isinstance(response.response, ModelResponse):
        raise ResponseRefused(f"ModelReplied.response must be a ModelResponse, got "
                              f"{type(response.response).__name__}")


def check_outcomes(response: ToolResults, running: Mapping[str, CallRecord]) -> list[Prepared]:
    """Each outcome matched to its running call, once; refused whole if any one is wrong."""
    if not response.outcomes:
        raise ResponseRefused(f"ToolResults for effect {response.effect_id} has no outcomes")
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
        writes = outcome.writes
        if type(writes) is not dict or writes:  # no writes (most calls): nothing to copy
            try:
                writes = json_value(dict(writes), f"the writes of call {outcome.call_id!r}")
            except (TypeError, ValueError) as exc:
                raise ResponseRefused(str(exc)) from exc
        else:
            writes = {}
        membership = outcome.membership
        if not isinstance(membership, Mapping) or not all(
                isinstance(k, str) and isinstance(v, bool) for k, v in membership.items()):
            raise ResponseRefused(f"the membership edits of call {outcome.call_id!r} must map "
                                  f"tool names to bools, got {membership!r}")
        prepared.append((record, outcome, writes))
    return prepared


def check_answers(run: RunState, answers: Mapping[str, Any]) -> dict[str, HandlerResult]:
    """The result each answer gives its suspended call: ``Ok`` or ``Err`` as given, a
    ``Relayed`` result, else ``Ok``."""
    if run.phase != "suspended":
        raise ResponseRefused(f"resume() needs a suspended run; this one is {run.phase}")
    if not isinstance(answers, Mapping) or not answers:
        raise ResponseRefused("resume() takes a non-empty mapping of call id -> answer")
    waiting = [r.call.id for r in run.calls if r.status == "suspended"]
    unknown = [key for key in answers if key not in waiting]
    if unknown:
        raise ResponseRefused(f"call(s) {unknown} are not waiting for an answer; waiting: "
                              f"{waiting}")
    questions = {r.call.id: r.question for r in run.calls
                 if r.status == "suspended" and r.question is not None}
    results: dict[str, HandlerResult] = {}
    for call_id, answer in answers.items():
        if isinstance(answer, Relayed):
            results[call_id] = answer.result
            continue
        if isinstance(answer, AskUser | Halt | Pending):
            raise ResponseRefused(f"the answer for call {call_id!r} is a "
                                  f"{type(answer).__name__}; answer with a value, Ok or Err")
        result = answer if isinstance(answer, Ok | Err) else Ok(answer)
        question = questions.get(call_id)
        why = None if question is None or isinstance(result, Err) else question.refusal(
            result.value)
        if why is not None:
            raise ResponseRefused(f"{why}; answer with one of them (or Err to refuse the call)")
        results[call_id] = result
    return results


def answers_for(suspended: Suspended, answer: Any, mode: Mode) -> Mapping[str, Any]:
    """The answers by call id; refused (nothing changes) when they do not fit the run."""
    waiting = [c for c in suspended.call_ids if c not in suspended.keys]
    if not waiting:
        raise ValueError(
            "the run waits only on completion keys; resolve them with agent.resolve(key, "
            "ok=...) and get the outcome with agent.resume_run(run_id)")
    if not isinstance(answer, Mapping):
        if len(waiting) == 1:
            return {waiting[0]: answer}
        raise ValueError(f"the run waits on {len(waiting)} calls {waiting}: pass a mapping "
                         "from call id to answer")
    keyed = sorted(set(answer) & set(suspended.keys))
    if keyed:
        raise ValueError(f"calls {keyed} wait on completion keys; resolve them with "
                         "agent.resolve(key, ok=...) instead of answering them")
    unknown = sorted(str(k) for k in set(answer) - set(waiting))
    if unknown or not answer:
        raise ValueError(
            f"answers for unknown call ids {unknown}; the run waits for answers to "
            f"{waiting}. A mapping answer is keyed by call id: to answer one call with a "
            "mapping value, wrap it as Ok({...}) or key it by the call's id")
    missing = [c for c in waiting if c not in answer]
    if missing and mode != "parallel_streaming":
        raise ValueError(f"no answer for calls {missing}; mode {mode!r} "
                         f"takes one answer per waiting call at once: {waiting}")
    return answer
