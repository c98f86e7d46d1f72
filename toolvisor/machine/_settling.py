"""How one call's result, and a policy's decision about its failure, settle its record.

Plain functions over a ``CallRecord``: the machine consults the policy, logs, and reports
progress; these only set the record's status, text, question, pending wait or halt (and build
the errors a call gets for naming an unknown tool or a reserved halt reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from toolvisor.call import MAX_ERROR_BYTES, encode, encode_checked, keep_ends
from toolvisor.contract import (
    AskUser,
    Err,
    Halt,
    HandlerResult,
    InvalidArguments,
    Ok,
    Pending,
    ToolCall,
    ToolError,
    Usage,
)
from toolvisor.machine._checkpoint import CallRecord, HaltRecord, RunState
from toolvisor.machine._config import MachineConfig, shown
from toolvisor.machine._outcomes import QUESTION_EXPIRED_CODE, PendingCall, Question
from toolvisor.machine._policy import BrokenPolicy, ContinueRun, Decision, HaltRun, RetryAfter
from toolvisor.machine._responses import CallOutcome

RESERVED_HALT_REASONS: frozenset[str] = frozenset(
    {"ask_user", "max_turns", "tool_error", "cancelled", "completed", "invalid_return"}
)
"""Halt reasons the runtime uses itself; a handler's ``Halt`` with one is ``invalid_return``."""


def record_result(record: CallRecord, result: HandlerResult, text: str,
                  *, turn: int) -> tuple[Any, str] | None:
    """Set the record from what its call (of ``turn``) returned.

    A failure is not recorded: it comes back as ``(error, text)`` for the policy to decide. That
    is an ``Err``, or a ``Halt`` with a reason the runtime reserves (``invalid_return``).
    """
    call = record.call
    match result:
        case Ok():
            _resolve(record, text, is_error=False)
        case Err(reason):
            return reason, text
        case AskUser(question, options, expires_in, default):
            record.status = "suspended"
            record.question = Question(call_id=call.id, tool=call.name, question=question,
                                       options=options, expires_in=expires_in, default=default)
        case Pending(deadline, on_timeout, on_cancel):
            record.status = "suspended"
            record.pending = PendingCall(call_id=call.id, tool=call.name, turn=turn,
                                         attempt=record.attempt, deadline=deadline,
                                         on_timeout=on_timeout, on_cancel=on_cancel)
        case Halt(reason, value) if reason in RESERVED_HALT_REASONS:
            error = ToolError(
                "invalid_return",
                f"tool error ({call.name}): invalid_return: Halt reason {reason!r} is "
                f"reserved by the runtime ({sorted(RESERVED_HALT_REASONS)}); use another",
                tool_name=call.name, tool_call_id=call.id, cause=reason)
            return error, encode(Err(error))
        case Halt(reason, value):
            _resolve(record, text, is_error=False)
            record.halt = HaltRecord(reason=reason, result=_jsonable(value))
    return None


def spent(usage: Usage, outcomes: Iterable[CallOutcome]) -> Usage:
    """``usage`` plus what the calls' direct completions spent: a call that made none (most
    calls) adds nothing, so only those that did are summed, instead of a new ``Usage`` per
    outcome."""
    for outcome in outcomes:
        used = outcome.usage
        if used.input_tokens or used.output_tokens or used.cached_tokens is not None:
            usage += used
    return usage


def date_questions(run: RunState, now: float) -> list[Question]:
    """Set ``now + expires_in`` as the deadline of each waiting question that expires and has
    none yet; returns those it set."""
    dated = []
    for record in run.calls:
        question = record.question
        if record.status == "suspended" and question is not None \
                and question.expires_in is not None and question.expires_at is None:
            record.question = question.model_copy(
                update={"expires_at": now + question.expires_in})
            dated.append(record.question)
    return dated


def expiry_result(call: ToolCall, question: Question) -> Ok | Err:
    """What a question that expired unanswered gives its call: its default answer, or (no
    default) a denial, ``timeout`` with code ``question_expired``, for the policy."""
    if question.default is not None:
        return Ok(question.default)
    return Err(ToolError(
        "timeout",
        f"tool error ({call.name}): timeout: the question {question.question!r} was not "
        f"answered within {question.expires_in} s; it expired and was denied",
        tool_name=call.name, tool_call_id=call.id, cause=question.expires_in,
        code=QUESTION_EXPIRED_CODE))


def refusal(record: CallRecord, config: MachineConfig,
            membership: Mapping[str, bool]) -> ToolError | InvalidArguments:
    """Why a call the model asked for cannot run: its tool is not in the catalog (as the run
    with its own ``membership`` edits sees it), or its arguments are no JSON object (the
    handler could never get them)."""
    violation = record.call.arguments_violation()
    if not record.known or violation is None:
        return not_found(record.call, config, membership)
    return InvalidArguments(record.call.name, [violation])


def not_found(call: ToolCall, config: MachineConfig,
              membership: Mapping[str, bool]) -> ToolError:
    """The error of a call that names a tool the catalog does not have."""
    return ToolError(
        "not_found",
        f"tool error ({call.name}): not_found: the model named tool {call.name!r}, which is "
        f"not in the catalog; known tools: {shown(config.known_tool_names(membership))}",
        tool_name=call.name, tool_call_id=call.id)


def carry_out(record: CallRecord, decision: Decision, error: Any, text: str) -> None:
    """Set a failed call's record as the policy decided; ``text`` is its error for the model."""
    call = record.call
    match decision:
        case ContinueRun(None):
            _resolve(record, text, is_error=True)
        case ContinueRun(Ok() | Err() as replacement):
            result, replaced = encode_checked(replacement, tool_name=call.name,
                                              tool_call_id=call.id)
            _resolve(record, replaced, is_error=isinstance(result, Err))
        case HaltRun(result):
            _resolve(record, text, is_error=True)
            record.halt = HaltRecord(reason="tool_error", result=(
                _jsonable(result) if result is not None else
                {"tool_call_id": call.id, "tool": call.name,
                 "error": _capped(_jsonable(error))}))
        case RetryAfter(delay):
            record.status = "retry_wait"
            record.text = text
            record.is_error = True
            record.retry_delay = float(delay)
            record.writes = {}
        case BrokenPolicy(detail):
            _resolve(record, text, is_error=True)
            record.halt = HaltRecord(reason="invalid_return", result={
                "tool_call_id": call.id, "tool": call.name, "detail": detail})


def _resolve(record: CallRecord, text: str, *, is_error: bool) -> None:
    """The call is done: ``text`` is what the model reads."""
    record.status = "done"
    record.text = text
    record.is_error = is_error


def call_status(record: CallRecord) -> str:
    """How a call came back, as ``call_finished`` progress reports it."""
    if record.status == "done":
        if record.halt is not None:
            return "halt"
        return "error" if record.is_error else "ok"
    return "retry" if record.status == "retry_wait" else record.status


def _capped(value: Any) -> Any:
    """``value`` with every long string kept to its ends under the error cap: an error stored
    in a halted run's outcome (and its checkpoint) is bounded as the model's text is."""
    if isinstance(value, str):
        return keep_ends(value, MAX_ERROR_BYTES)
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v) for v in value]
    return value


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
