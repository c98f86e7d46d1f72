"""The activities of a worker: one model call, one tool call, each under toolvisor's runner.

A tool call runs in its tool's isolation with its timeout (the ``ToolRunner`` stops a hung
call at its deadline and gives ``timeout``), while a task of the activity's own, not the tool,
sends Temporal the heartbeats (with the call's latest ``report_progress`` as details), so a
busy tool never looks lost and a lost worker is noticed within the heartbeat timeout.
Cancelling the activity cancels the call as at its deadline.

Threads: the activities run on the worker's event loop; a call's result comes back on a
runner thread and is handed to that loop (a ``LoopReply``); a ``_Progress`` is
written by the handler's thread and read by the heartbeat task under its lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, cast

from temporalio import activity

from toolvisor.call import encode_checked
from toolvisor.contract import (
    CallContext,
    DurableEffectsAccess,
    Err,
    HandlerResult,
    ModelRequest,
    ProcessAccess,
    SessionsAccess,
    ToolError,
)
from toolvisor.executor import CallHandle, ToolRunner
from toolvisor.host import LoopReply, ModelAnswer, ModelCalls
from toolvisor.machine import CallToRun, StateView
from toolvisor.temporal import _refused
from toolvisor.temporal._agent import TemporalAgent
from toolvisor.temporal._codec import answer_to_json, plain, result_to_json
from toolvisor.temporal._keys import completion_key
from toolvisor.temporal._registry import agent_named

MODEL_ACTIVITY = "toolvisor.model"
TOOL_ACTIVITY = "toolvisor.tool"
BEATS_PER_TIMEOUT = 4  # heartbeats sent within each heartbeat timeout


class _Progress:
    """A call's progress sink: keeps its latest report for the next heartbeat's details."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Any] | None = None

    def report(self, message: str, fraction: float | None) -> None:
        with self._lock:
            self._latest = {"message": message, "fraction": fraction}

    def heartbeat(self) -> None:
        """A sign of life from the tool itself: the activity heartbeats on its own."""

    def latest(self) -> dict[str, Any] | None:
        with self._lock:
            return self._latest


class _Keys:
    """Completion keys of a call on Temporal: the key names the run and this attempt of the
    call; the call's result arrives by ``complete_key`` (or ``complete`` with the call id)."""

    def __init__(self, workflow_id: str, planned: CallToRun) -> None:
        self._key = completion_key(workflow_id, planned.turn, planned.attempt, planned.call.id)
        self.issued: str | None = None

    def issue(self) -> str:
        self.issued = self._key
        return self._key


async def _outcome(start: Callable[[Callable[[Any], None]], CallHandle]) -> Any:
    """Start a runner call with ``start(on_done)`` and wait for what it delivers; cancelling
    the wait (the activity was cancelled) cancels the call."""
    reply = LoopReply(asyncio.get_running_loop())  # set from a runner thread, once
    handle = start(reply.set_result)
    try:
        return await reply
    except asyncio.CancelledError:
        handle.cancel()
        raise


class Activities:
    """The model and tool activities of one worker, run by its ``runner``.

    Args:
        agents: The worker's agents (each looked up by the name a run gives).
        runner: Runs the model and tool calls (the worker's, closed with it).
    """

    def __init__(self, agents: list[TemporalAgent], runner: ToolRunner) -> None:
        self._runner = runner
        self._models = {a.name: ModelCalls(a.model, runner, a.timeouts.model) for a in agents}

    def close(self) -> None:
        """Close the agents' models' connections (before the runner closes)."""
        for calls in self._models.values():
            calls.close()

    @activity.defn(name=MODEL_ACTIVITY)
    async def model_call(self, data: dict[str, Any]) -> dict[str, Any]:
        """Ask agent ``data["agent"]``'s model ``data["request"]``: its response, or the
        ``ModelError`` for the workflow's model policy (never raised: one attempt)."""
        agent = agent_named(data["agent"])
        calls = self._models[agent.name]
        request = ModelRequest.model_validate(data["request"])
        beating = asyncio.create_task(_beat(_Progress(), agent.heartbeat_timeout))
        try:
            answer: ModelAnswer = await _outcome(lambda on_done: calls.start(request, on_done))
        finally:
            beating.cancel()
        return answer_to_json(answer)

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool_call(self, data: dict[str, Any]) -> dict[str, Any]:
        """Run the call ``data["call"]`` (a ``CallToRun``) of agent ``data["agent"]``: its
        result, the model's text of it and its state writes, as JSON data."""
        agent = agent_named(data["agent"])
        planned = CallToRun.model_validate(data["call"])
        call = planned.call
        tool = agent.tool(call.name)
        view = StateView(planned.state)
        result: HandlerResult
        if tool is None:  # the workflow checked the agent's fingerprint: a bug if it happens
            result = Err(ToolError("handler_exit", f"tool error ({call.name}): handler_exit: "
                                   f"the worker's agent {agent.name!r} has no such tool",
                                   tool_name=call.name, tool_call_id=call.id,
                                   code="unknown_tool"))
        else:
            progress = _Progress()
            run_id = activity.info().workflow_id or ""  # set for every workflow's activity
            ctx = CallContext(
                session_id=run_id, tool_call=call, turn=planned.turn,
                attempt=planned.attempt, state=view, progress=progress,
                completion_keys=_Keys(run_id, planned),
                durable=cast(DurableEffectsAccess, _refused.DURABLE_EFFECTS),
                process_admin=cast(ProcessAccess, _refused.PROCESSES),
                sessions=cast(SessionsAccess, _refused.SESSIONS))
            beating = asyncio.create_task(_beat(progress, agent.heartbeat_timeout))
            try:
                result = await _outcome(
                    lambda on_done: self._runner.start(tool, call.arguments, ctx, on_done))
            finally:
                beating.cancel()
        result, text = encode_checked(result, tool_name=call.name, tool_call_id=call.id)
        return {"call_id": call.id, "result": result_to_json(result), "text": text,
                "writes": plain(dict(view.writes))}


async def _beat(progress: _Progress, timeout: float) -> None:
    """Heartbeat (with the call's latest progress) until cancelled: the supervisor's beat,
    whatever the tool's own thread, loop or process does."""
    while True:
        latest = progress.latest()
        if latest is None:
            activity.heartbeat()
        else:
            activity.heartbeat(latest)
        await asyncio.sleep(timeout / BEATS_PER_TIMEOUT)
