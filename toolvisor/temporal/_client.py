"""Starting runs, answering and completing their waiting calls, and awaiting their outcome:
the client's side of ``toolvisor.temporal``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from toolvisor.contract import Err, Ok, ToolvisorError
from toolvisor.machine import PendingCall, Question
from toolvisor.temporal._agent import TemporalAgent
from toolvisor.temporal._codec import FinalOutcome, outcome_from_json, result_to_json
from toolvisor.temporal._keys import parse_key
from toolvisor.temporal._workflow import WORKFLOW

RunHandle: TypeAlias = WorkflowHandle[Any, Any]
"""A run's workflow handle (``client.get_workflow_handle(run_id)`` gives one too)."""


class UpdateRefusedError(ToolvisorError, ValueError):
    """The run refused an answer or a completion before it entered its history: the call
    is not waiting for one, or the answer is not one of the question's options."""


async def start_run(client: Client, agent: TemporalAgent, prompt: str, *, run_id: str,
                    task_queue: str, state: Mapping[str, Any] | None = None) -> RunHandle:
    """Start a run of ``agent`` as a workflow; returns its handle at once.

    Args:
        client: The connected Temporal client.
        agent: The agent (its workers must have the same one: a run of an agent whose tools
            or settings differ from the worker's fails, naming both).
        prompt: The user's prompt.
        run_id: The workflow id: the run's name, unique among running workflows.
        task_queue: The task queue the agent's workers poll.
        state: The run's initial state (JSON data), read by tools as ``ctx.state``.
    """
    start = _start("start_run", agent, prompt, state)
    return await client.start_workflow(WORKFLOW, start, id=run_id, task_queue=task_queue)


def _start(who: str, agent: TemporalAgent, prompt: str,
           state: Mapping[str, Any] | None) -> dict[str, Any]:
    """The workflow's start argument, once ``agent`` and ``prompt`` were checked."""
    if not isinstance(agent, TemporalAgent):
        raise TypeError(f"{who} needs a TemporalAgent, got {type(agent).__name__}")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"{who} needs the user's prompt as a non-empty str, got {prompt!r}")
    return {"agent": agent.name, "fingerprint": agent.fingerprint, "prompt": prompt,
            "state": dict(state or {})}


async def start_or_answer(client: Client, agent: TemporalAgent, text: str, *, run_id: str,
                          task_queue: str, state: Mapping[str, Any] | None = None,
                          ) -> Literal["started", "answered"]:
    """A user's message to run ``run_id``, in one update-with-start, for a front end that
    keeps no state of its own: when no run ``run_id`` is running, one starts with ``text`` as
    its prompt (``"started"``); when it runs and asks one open question, ``text`` answers it
    (``"answered"``, once the run has taken it). ``UpdateRefusedError`` (and nothing in the
    run's history) when the run asks no question or several (answer those with
    :func:`answer`), or ``text`` is not one of the question's options.

    Args:
        client: The connected Temporal client.
        agent: The agent (as in :func:`start_run`).
        text: The user's message: a new run's prompt, or the open question's answer.
        run_id: The workflow id, the conversation's name.
        task_queue: The task queue the agent's workers poll.
        state: A new run's initial state (JSON data).
    """
    token = uuid.uuid4().hex  # tells the run whether this very call started it
    start = _start("start_or_answer", agent, text, state) | {"token": token}
    operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        WORKFLOW, start, id=run_id, task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
    try:
        said = await client.execute_update_with_start_workflow(
            "message", args=[token, text], start_workflow_operation=operation)
    except WorkflowUpdateFailedError as exc:
        raise UpdateRefusedError(f"run {run_id!r} refused the message: "
                                 f"{_reason(exc)}") from exc
    return "started" if said == "started" else "answered"


async def outcome(handle: RunHandle) -> FinalOutcome:
    """Wait for the run's end: ``Completed``, ``Halted`` or ``Failed`` (never raised).

    Args:
        handle: The run's handle.
    """
    return outcome_from_json(await handle.result())


async def _update(handle: RunHandle, name: str, *args: Any) -> None:
    try:
        await handle.execute_update(name, args=list(args))
    except WorkflowUpdateFailedError as exc:
        raise UpdateRefusedError(f"run {handle.id!r} refused the {name}: "
                                 f"{_reason(exc)}") from exc
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:  # a server that cannot be reached: as it is
            raise
        raise UpdateRefusedError(f"run {handle.id!r} takes no {name}: {exc.message} (it "
                                 "has ended, or there is no such run)") from exc


def _reason(exc: WorkflowUpdateFailedError) -> str:
    cause = exc.cause
    return cause.message if isinstance(cause, ApplicationError) else str(cause or exc)


async def answer(handle: RunHandle, call_id: str, value: Any) -> None:
    """Answer the question (``AskUser``) of call ``call_id``; returns once the run has taken
    it. ``UpdateRefusedError`` (and nothing in the run's history) for a call that asks
    nothing, an answer that is not one of the question's options, or a run that has ended.

    Args:
        handle: The run's handle.
        call_id: The call that asked (``Question.call_id``).
        value: The answer: one of the options, or any JSON value for a free question.
    """
    await _update(handle, "answer", call_id, value)


async def complete(handle: RunHandle, call_id: str, value: Any = None, *,
                   error: Any = None) -> None:
    """Complete the call ``call_id`` that returned ``Pending`` (or of a ``manual`` tool):
    ``Ok(value)``, or ``Err(error)`` when ``error`` is given. ``UpdateRefusedError`` for a
    call that is not waiting.

    Args:
        handle: The run's handle.
        call_id: The waiting call (``PendingCall.call_id``).
        value: The call's result (JSON data).
        error: The call's error instead (JSON data), for ``on_tool_error``.
    """
    result = Ok(value) if error is None else Err(error)
    await _update(handle, "complete", call_id, result_to_json(result))


async def complete_key(client: Client, key: str, value: Any = None, *,
                       error: Any = None) -> None:
    """Complete the call that took ``key`` (``ctx.completion_key()``) and returned
    ``Pending``: ``Ok(value)``, or ``Err(error)`` when ``error`` is given. The key names the
    run, so a system holding only the key completes the call. ``UpdateRefusedError`` for a
    call, or an attempt of it, that is not waiting; ``ValueError`` for text that is no key.

    Args:
        client: The connected Temporal client.
        key: The key the call took.
        value: The call's result (JSON data).
        error: The call's error instead (JSON data), for ``on_tool_error``.
    """
    run_id, turn, attempt, call_id = parse_key(key)
    result = Ok(value) if error is None else Err(error)
    await _update(client.get_workflow_handle(run_id), "complete", call_id,
                  result_to_json(result), [turn, attempt])


async def questions(handle: RunHandle) -> list[Question]:
    """The run's open questions, in call order (none while it is not waiting).

    Args:
        handle: The run's handle.
    """
    return [Question.model_validate(q) for q in await handle.query("questions")]


async def pending_calls(handle: RunHandle) -> list[PendingCall]:
    """The run's calls waiting to be completed, in call order.

    Args:
        handle: The run's handle.
    """
    return [PendingCall.model_validate(p) for p in await handle.query("pending")]
