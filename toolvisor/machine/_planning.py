"""A batch of tool calls in the run state, from the model's response to its result messages.

Plain functions over ``RunState``: plan the calls into steps, start a step's calls and retries
(the ``CallToRun`` list of a ``ToolCalls`` effect, which keeps the calls still running as first
emitted), commit a settled step's state writes, and close the batch with one result message
per call. The machine decides when; these say what changes.
"""

from __future__ import annotations

import copy

from toolvisor.call import encode, prepare_arguments
from toolvisor.contract import Err, ModelResponse, Tool, ToolResultMessage
from toolvisor.machine._checkpoint import CallRecord, RunState, StepRecord
from toolvisor.machine._config import MachineConfig
from toolvisor.machine._effects import Backoff, CallToRun, EffectId, ToolCalls
from toolvisor.machine._outcomes import ManualCall, StateConflict
from toolvisor.machine._settling import not_found
from toolvisor.machine._trusted import trusted


def repeated_ids(response: ModelResponse) -> list[str]:
    """The call ids ``response`` uses more than once, sorted (a set first: most have none)."""
    ids = [c.id for c in response.tool_calls]
    if len(set(ids)) == len(ids):
        return []
    return sorted({i for i in ids if ids.count(i) > 1})


def plan_batch(run: RunState, config: MachineConfig, response: ModelResponse) -> None:
    """Group the calls into steps: parallel ones together first, then each serial one, then
    one manual step with the calls the caller runs.

    Calls that cannot run are in no step (``step`` -1): a call of an unknown tool or with
    arguments that are no JSON object stays queued for the policy, and every call of a
    response cut off at the token limit is done at once, told why it did not run.
    """
    records: list[CallRecord] = []
    tools: dict[str, Tool | None] = {}  # each tool looked up once per batch, not once per call
    for call in response.tool_calls:
        if (name := call.name) not in tools:
            tools[name] = config.tool_named(name, run.membership)
        tool = tools[name]
        records.append(CallRecord(call=call, step=-1, known=tool is not None,
                                  retryable=tool is not None and tool.retryable))
    run.calls = records
    runnable: list[tuple[int, Tool]] = []
    if response.finish_reason == "length":
        for record in records:
            record.status, record.is_error = "done", True
            record.text = _unresolved_text("truncated", _TRUNCATED)
    else:
        for i, record in enumerate(records):
            tool = tools[record.call.name]
            if tool is not None and record.call.arguments_violation() is None:
                runnable.append((i, tool))
    manual = [i for i, tool in runnable if tool.manual]
    handled = [(i, tool) for i, tool in runnable if not tool.manual]
    if config.mode == "sequential":
        groups = [[i] for i, _ in handled]
    else:
        parallel = [i for i, tool in handled if tool.scheduling == "parallel"]
        serial = [[i] for i, tool in handled if tool.scheduling != "parallel"]
        groups = ([parallel] if parallel else []) + serial
    run.steps = [StepRecord(calls=group) for group in groups]
    if manual:
        groups.append(manual)
        run.steps.append(StepRecord(calls=manual, manual=True))
    run.cursor = 0
    for index, group in enumerate(groups):
        for i in group:
            records[i].step = index


def hand_to_caller(run: RunState, config: MachineConfig,
                   records: list[CallRecord]) -> list[tuple[CallRecord, Err]]:
    """Suspend each call of a manual step whose arguments fit its tool's schema, with them;
    the others come back with their ``Err(InvalidArguments)``, for the policy."""
    invalid: list[tuple[CallRecord, Err]] = []
    for record in records:
        call = record.call
        tool = config.tool_named(call.name, run.membership)
        checked = prepare_arguments(tool, call.arguments) if tool is not None else Err(
            not_found(call, config, run.membership))
        if isinstance(checked, Err):
            invalid.append((record, checked))
            continue
        record.status = "suspended"
        record.manual = ManualCall(call_id=call.id, tool=call.name,
                                   arguments=dict(call.arguments))
    return invalid


def start_step(run: RunState, step: StepRecord, records: list[CallRecord],
               effect_id: EffectId) -> tuple[CallToRun, ...]:
    """The calls of ``step``'s next ``ToolCalls`` effect (id ``effect_id``), in call order.

    ``records`` start now: queued ones at their attempt, each one waiting for a retry at its
    next attempt with its backoff (counted from this effect). The calls of the outstanding
    effect still running are listed again exactly as first emitted: a retry never waits for a
    sibling, and a sibling never starts twice. The step's state snapshot is taken once.
    """
    if step.snapshot is None:
        step.snapshot = copy.deepcopy(run.state)
    outstanding = run.outstanding
    listed = {c.call.id: c for c in outstanding.calls} if isinstance(outstanding, ToolCalls) \
        else {}
    starting = {id(r) for r in records}
    calls = []
    for index in step.calls:
        record = run.calls[index]
        if id(record) in starting:
            backoff = None
            if record.status == "retry_wait":
                record.attempt += 1
                backoff = Backoff(seconds=record.retry_delay or 0.0, since=effect_id)
                record.retry_delay = None
            record.status = "running"
            calls.append(trusted(CallToRun, call=record.call, turn=run.turns,
                                 attempt=record.attempt, state=dict(step.snapshot),
                                 backoff=backoff))
        elif record.status == "running":
            calls.append(listed[record.call.id])
    return tuple(calls)


def retries_beside_siblings(run: RunState) -> list[CallRecord]:
    """The calls of the running step to retry now, while others of it still run; none while a
    call halts the run (its siblings finish, then it ends)."""
    if any(r.halt is not None for r in run.calls):
        return []
    return [run.calls[i] for i in run.steps[run.cursor].calls
            if run.calls[i].status == "retry_wait"]


def still_running(run: RunState, effect: ToolCalls) -> ToolCalls:
    """The outstanding ``effect`` listing only its calls still running, each as first emitted."""
    running = {r.call.id for r in run.calls if r.status == "running"}
    calls = tuple(c for c in effect.calls if c.call.id in running)
    return effect if len(calls) == len(effect.calls) else effect.model_copy(update={"calls": calls})


def commit_step(run: RunState, step: StepRecord) -> list[StateConflict]:
    """Apply a settled step's writes in call order; a second writer of a key is dropped.

    Returns the conflicts this commit found (each also noted in the losing call's message).
    """
    if step.committed or step.snapshot is None:
        step.committed = True
        return []
    step.committed = True
    writers: dict[str, str] = {}
    found: list[StateConflict] = []
    for record in (run.calls[i] for i in step.calls):
        for key, value in record.writes.items():
            first = writers.get(key)
            if first is None:
                writers[key] = record.call.id
                run.state[key] = value
                continue
            found.append(StateConflict(key=key, kept_call_id=first,
                                       dropped_call_id=record.call.id, turn=run.turns))
            record.notes += (
                f"[toolvisor: this call's write to state key {key!r} was discarded: call "
                f"{first!r}, earlier in the same parallel step, wrote it first]",)
    run.conflicts.extend(found)
    return found


def close_batch(run: RunState, why: str) -> None:
    """Append one result message per call of the batch, in the order the model asked."""
    for record in run.calls:
        text, is_error = record.text, record.is_error
        if record.status == "queued":
            text, is_error = _unresolved_text("not_run", f"not run: {why}"), True
        elif record.status == "running":
            text, is_error = _unresolved_text("not_completed", f"did not complete: {why}"), True
        elif record.status == "suspended":
            text, is_error = _unresolved_text("not_answered", f"no answer: {why}"), True
        content = "\n".join([text or "", *record.notes])
        run.messages.append(trusted(ToolResultMessage, role="tool", tool_call_id=record.call.id,
                                    name=record.call.name, content=content,
                                    is_error=is_error))
    run.calls = []
    run.steps = []
    run.cursor = 0


_TRUNCATED = ("not run: the model's output was cut off at its token limit before it was "
              "complete, so this call may be half-written; ask for it again, with shorter "
              "arguments or fewer calls at once")


def _unresolved_text(reason: str, message: str) -> str:
    return encode(Err({"reason": reason, "message": message}))
