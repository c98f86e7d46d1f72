"""Faults under a run on the Temporal dev server: a worker SIGKILLed mid-call, mid-batch and
while its run waits; the run goes on on another worker, a lost call decided by
``on_tool_error``, no finished or non-retryable call run twice. A toolvisor error in workflow
code fails the run once."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import TimeoutType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from tests.programs import temporal_worker as worker_app
from tests.programs.temporal_worker import AGENT
from tests.temporal._harness import (
    Temporal,
    child_worker,
    eventually,
    ran,
    run_id,
    tool_texts,
    working,
)
from toolvisor import Completed, function_tool
from toolvisor.temporal import TemporalAgent, answer, outcome, questions, start_run
from toolvisor.testing import ScriptedModel, call, calls


def _queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def _completed(server: Temporal, handle: Any) -> set[str]:
    """The ids of the run's activities that completed so far."""
    history = server.run(handle.fetch_history())
    scheduled = {e.event_id: e.activity_task_scheduled_event_attributes.activity_id
                 for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")}
    return {scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
            for e in history.events if e.HasField("activity_task_completed_event_attributes")}


def test_an_activity_worker_killed_mid_batch_loses_only_its_running_calls(
        dev_server: Temporal, tmp_path: Path) -> None:
    queue = _queue()
    with child_worker(dev_server, queue, stall=True) as doomed:
        handle = dev_server.run(start_run(dev_server.client, AGENT, f"batch {tmp_path}",
                                          run_id=run_id(), task_queue=queue))
        eventually(lambda: {"tool-1.1.c1"} <= _completed(dev_server, handle)
                   and len(ran(tmp_path)) == 3, "the batch's calls starting, one finishing")
        doomed.kill()
    with working(dev_server, AGENT, queue=queue, sticky_timeout=1):
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed)
    texts = tool_texts(done)
    assert (texts["c1"], texts["c3"]) == ("noted", "stall_again done")
    assert all(word in texts["c2"] for word in ("handler_exit", "worker_lost", "was lost"))
    # the finished call and the non-retryable one ran once, on the killed worker; the
    # retryable one again, here, as the policy decided
    assert sorted(ran(tmp_path)) == sorted([
        ("note", "c1", doomed.pid), ("stall", "c2", doomed.pid),
        ("stall_again", "c3", doomed.pid), ("stall_again", "c3", os.getpid())])
    history = dev_server.run(handle.fetch_history())
    scheduled = {e.event_id: e.activity_task_scheduled_event_attributes
                 for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")}
    lost = sorted((scheduled[t.scheduled_event_id].activity_id,
                   t.failure.timeout_failure_info.timeout_type)
                  for e in history.events
                  if e.HasField("activity_task_timed_out_event_attributes")
                  for t in [e.activity_task_timed_out_event_attributes])
    # noticed by the missing heartbeats (1 s), not at start_to_close (35 s)
    assert lost == [("tool-1.1.c2", TimeoutType.TIMEOUT_TYPE_HEARTBEAT),
                    ("tool-1.1.c3", TimeoutType.TIMEOUT_TYPE_HEARTBEAT)]
    assert sorted(a.activity_id for a in scheduled.values() if a.activity_id.startswith(
        "tool-")) == ["tool-1.1.c1", "tool-1.1.c2", "tool-1.1.c3", "tool-1.2.c3"]


def test_a_workflow_worker_killed_while_its_run_waits_is_replaced_by_another(
        dev_server: Temporal, tmp_path: Path) -> None:
    queue = _queue()
    with child_worker(dev_server, queue, stall=False) as doomed:
        handle = dev_server.run(start_run(dev_server.client, AGENT, f"ask {tmp_path}",
                                          run_id=run_id(), task_queue=queue))
        eventually(lambda: dev_server.run(questions(handle)), "the run's question")
        doomed.kill()
    with working(dev_server, AGENT, queue=queue):
        dev_server.run(answer(handle, "c2", "yes"))  # taken by this worker, after a replay
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed) and done.text == "c1=noted; c2=yes"
    assert ran(tmp_path) == [("note", "c1", doomed.pid)]
    history = dev_server.run(handle.fetch_history())
    ids = [e.activity_task_scheduled_event_attributes.activity_id for e in history.events
           if e.HasField("activity_task_scheduled_event_attributes")]
    assert len(ids) == len(set(ids)) == 5  # three model calls, two tool calls: each once


def _tasks_done(server: Temporal, handle: Any) -> int:
    history = server.run(handle.fetch_history())
    return sum(e.HasField("workflow_task_completed_event_attributes") for e in history.events)


def test_a_workflow_worker_killed_while_a_call_runs_elsewhere_is_replaced_by_another(
        dev_server: Temporal, tmp_path: Path) -> None:
    worker_app.RELEASE.clear()
    queue = _queue()
    with child_worker(dev_server, queue, stall=False, serves="workflows") as doomed:
        handle = dev_server.run(start_run(dev_server.client, AGENT, f"hold {tmp_path}",
                                          run_id=run_id(), task_queue=queue))
        eventually(lambda: _tasks_done(dev_server, handle), "the killed worker's first task")
        with working(dev_server, AGENT, queue=queue, serves="activities"):
            eventually(lambda: ran(tmp_path), "the call running on the activity worker")
            doomed.kill()
            worker_app.RELEASE.set()  # the call ends while no workflow worker is alive
            with working(dev_server, AGENT, queue=queue, serves="workflows"):
                done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed) and done.text == "c1=held"
    assert ran(tmp_path) == [("hold", "c1", os.getpid())]
    history = dev_server.run(handle.fetch_history())
    ids = [e.activity_task_scheduled_event_attributes.activity_id for e in history.events
           if e.HasField("activity_task_scheduled_event_attributes")]
    assert len(ids) == len(set(ids)) == 3  # two model calls, one tool call: each once


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@activity.defn(name="toolvisor.model")
async def _model(data: dict[str, Any]) -> dict[str, Any]:
    """A model activity of another build: asks for one ``add`` call."""
    return {"response": calls(call("add", {"a": 1, "b": 2}, id="c1")).model_dump(mode="json")}


@activity.defn(name="toolvisor.tool")
async def _tool(data: dict[str, Any]) -> dict[str, Any]:
    """A tool activity of another build: answers for a call the batch does not have."""
    return {"call_id": "stranger", "result": {"kind": "ok", "value": 3}, "text": "3",
            "writes": {}}


def test_a_toolvisor_error_in_workflow_code_fails_the_run_once(dev_server: Temporal) -> None:
    agent = TemporalAgent("misanswered", ScriptedModel(["unused"]), [add])
    queue = _queue()

    async def calls_elsewhere() -> Worker:
        worker = Worker(dev_server.client, task_queue=queue, activities=[_model, _tool])
        return await worker.__aenter__()

    with working(dev_server, agent, queue=queue, serves="workflows"):
        elsewhere = dev_server.run(calls_elsewhere())
        try:
            handle = dev_server.run(start_run(dev_server.client, agent, "1 + 2?",
                                              run_id=run_id(), task_queue=queue))
            with pytest.raises(WorkflowFailureError) as failed:
                dev_server.run(outcome(handle))
        finally:
            dev_server.run(elsewhere.__aexit__(None, None, None))
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ResponseRefused"
    assert "stranger" in cause.message
    history = dev_server.run(handle.fetch_history())
    assert not [e for e in history.events
                if e.HasField("workflow_task_failed_event_attributes")]
