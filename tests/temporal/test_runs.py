"""Runs on the Temporal dev server: the loop as a workflow, each tool call an activity under
toolvisor's runner, the agent's policy the one retry authority."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from tests.temporal import _tools
from tests.temporal._harness import Temporal, eventually, run_id, tool_texts, working
from toolvisor import (
    Bulkhead,
    CallAttempt,
    CallContext,
    CapabilityError,
    Completed,
    ContinueRun,
    Decision,
    Err,
    Halted,
    Limits,
    OutputProjection,
    Resilience,
    RetryAfter,
    RetryPolicy,
    Timeouts,
    ToolError,
    function_tool,
)
from toolvisor.temporal import WORKFLOW, AgentWorker, TemporalAgent, outcome, start_run
from toolvisor.testing import ScriptedModel, call, calls


@function_tool(timeout=5)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_two_turn_run_with_a_tool_completes(dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("add", {"a": 2, "b": 3}, id="c1")), "five"])
    agent = TemporalAgent("two-turns", model, [add], timeouts=Timeouts(model=45))
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "2 + 3?", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed)
    assert (done.text, done.turns, tool_texts(done)) == ("five", 2, {"c1": "5"})
    history = dev_server.run(handle.fetch_history())
    scheduled = [e.activity_task_scheduled_event_attributes for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert [(a.activity_id, a.retry_policy.maximum_attempts) for a in scheduled] == [
        ("model-2", 1), ("tool-1.1.c1", 1), (scheduled[2].activity_id, 1)]
    # each stopped by the runner at its timeout; Temporal's only for a lost worker
    assert [(a.start_to_close_timeout.ToTimedelta().total_seconds(),
             a.heartbeat_timeout.ToTimedelta().total_seconds()) for a in scheduled] == [
        (45 + 5, 10), (5 + 5, 10), (45 + 5, 10)]


def test_a_hung_sync_tool_is_killed_at_its_deadline_and_its_effect_never_lands(
        dev_server: Temporal, tmp_path: Path) -> None:
    marker = tmp_path / "landed"
    model = ScriptedModel([calls(call("hang", {"marker": str(marker)}, id="c1")), "moved on"])
    agent = TemporalAgent("hung", model, [_tools.hang], timeout_grace=30)
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "hang", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
        assert isinstance(done, Completed) and done.text == "moved on"
        assert "timeout" in tool_texts(done)["c1"]
        history = dev_server.run(handle.fetch_history())
        assert not [e for e in history.events
                    if e.HasField("activity_task_timed_out_event_attributes")]
        pid = int(Path(f"{marker}.pid").read_text())
        eventually(lambda: _gone(pid), f"the hung tool's process {pid} ending")
    assert not marker.exists()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` is dead (gone, or a zombie nobody reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


RUNS: dict[str, int] = {}
RUNS_LOCK = threading.Lock()


def _ran(name: str) -> int:
    with RUNS_LOCK:
        RUNS[name] = RUNS.get(name, 0) + 1
        return RUNS[name]


@function_tool(retryable=True)
def flaky() -> str:
    """Fails its first run."""
    if _ran("flaky") == 1:
        raise RuntimeError("first run fails")
    return "flaky ok"


@function_tool
def fragile() -> str:
    """Always crashes; not retryable."""
    _ran("fragile")
    raise RuntimeError("fragile broke")


@function_tool
def refuse() -> Err:
    """Reports its own failure."""
    _ran("refuse")
    return Err("no such city")


def test_a_crash_and_an_err_each_reach_on_tool_error_and_only_it_retries(
        dev_server: Temporal) -> None:
    seen: list[tuple[str, bool, Any]] = []

    def policy(attempt: CallAttempt, error: Any) -> Decision:
        crashed = isinstance(error, ToolError)
        seen.append((attempt.name, crashed, error.reason if crashed else error))
        return RetryAfter(0.2) if crashed and attempt.retryable else ContinueRun()

    RUNS.clear()
    model = ScriptedModel([calls(call("flaky", id="c1"), call("fragile", id="c2"),
                                 call("refuse", id="c3")), "done"])
    agent = TemporalAgent("policies", model, [flaky, fragile, refuse], on_tool_error=policy)
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "go", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed)
    assert sorted(set(seen)) == [("flaky", True, "handler_raised"),
                                 ("fragile", True, "handler_raised"),
                                 ("refuse", False, "no such city")]
    assert RUNS == {"flaky": 2, "fragile": 1, "refuse": 1}
    texts = tool_texts(done)
    assert texts["c1"] == "flaky ok" and "fragile broke" in texts["c2"]
    assert "no such city" in texts["c3"]


def test_on_tool_error_by_tool_name_with_a_default_for_every_other_tool(
        dev_server: Temporal) -> None:
    RUNS.clear()
    model = ScriptedModel([calls(call("flaky", id="c1")), calls(call("fragile", id="c2")),
                           "unused"])
    retry = RetryPolicy(base_delay=0, jitter=0)  # its otherwise: "continue"
    agent = TemporalAgent("by-name", model, [flaky, fragile],
                          on_tool_error={"fragile": "halt", "*": retry})
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "go", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
    assert RUNS == {"flaky": 2, "fragile": 1}  # "*" retried flaky's crash at turn 1
    assert isinstance(done, Halted) and done.reason == "tool_error"  # fragile's own policy
    assert (done.turns, tool_texts(done)["c1"]) == (2, "flaky ok")
    with pytest.raises(ValueError, match=r"on_tool_error names unknown tool 'fragil'; known "
                                         r"tools: \['flaky', 'fragile'\] \(use '\*' for every "):
        TemporalAgent("typo", model, [flaky, fragile], on_tool_error={"fragil": "halt"})


def test_limits_turns_halts_a_run_whose_model_still_asks_for_tools(
        dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("add", {"a": 1, "b": 1}, id="c1")),
                           calls(call("add", {"a": 2, "b": 2}, id="c2")), "unused"])
    agent = TemporalAgent("one-turn", model, [add], limits=Limits(turns=1))
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "add", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Halted) and done.reason == "max_turns" and done.turns == 1


GATED = Resilience(bulkhead=Bulkhead(max_concurrent=1))


@pytest.mark.parametrize(("setting", "named"), [
    ({"limits": Limits(per_tool=GATED)}, "Limits.per_tool"),
    ({"limits": Limits(tool_output=OutputProjection())}, "Limits.tool_output"),
    ({"limits": Limits(concurrent_calls=4)}, "Limits.concurrent_calls"),
    ({"limits": Limits(process_workers=4)}, "Limits.process_workers"),
    ({"limits": Limits(session_depth=1)}, "Limits.session_depth"),
    ({"limits": Limits(child_sessions=1)}, "Limits.child_sessions"),
    ({"timeouts": Timeouts(model_warn_after=None)}, "Timeouts.model_warn_after"),
])
def test_a_setting_temporal_does_not_honour_is_refused_naming_it(
        setting: dict[str, Any], named: str) -> None:
    with pytest.raises(CapabilityError, match=f"TemporalAgent does not take {named} ") as refused:
        TemporalAgent("unhonoured", ScriptedModel(["hi"]), [add], **setting)
    assert refused.value.code == "setting_unavailable"


def test_the_fingerprint_covers_turns_and_which_tools_have_their_own_policy() -> None:
    model = ScriptedModel(["hi"])

    def fingerprint(**settings: Any) -> str:
        return TemporalAgent("printed", model, [add, refuse], **settings).fingerprint

    plain = fingerprint()
    assert plain == fingerprint(limits=Limits(turns=8), on_tool_error="halt")
    assert plain != fingerprint(limits=Limits(turns=3))
    assert plain != fingerprint(on_tool_error={"add": "halt"})
    with pytest.raises(TypeError, match=r"limits must be a toolvisor\.Limits"):
        TemporalAgent("bare", model, limits=3)  # type: ignore[arg-type]


@function_tool
def journaled(ctx: CallContext) -> str:
    """Asks for durable effects, which runs on Temporal do not have yet."""
    ctx.durable_effects().run_json("step", {}, lambda _: 1)
    return "unreachable"


def test_a_capability_temporal_lacks_is_refused_naming_it(dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("journaled", id="c1")), "noted"])
    agent = TemporalAgent("refusals", model, [journaled])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "go", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
    text = tool_texts(done)["c1"]
    assert "durable_effects_unavailable" in text and "on Temporal yet" in text


def test_a_run_for_an_agent_the_worker_lacks_or_has_otherwise_fails_once_naming_it(
        dev_server: Temporal) -> None:
    model = ScriptedModel(["hi"])
    known = TemporalAgent("known", model, [add])
    stranger = TemporalAgent("stranger", model, [add])
    changed = TemporalAgent("known", model, [add, refuse])
    with working(dev_server, known) as queue:
        for agent, kind, named in ((stranger, "UnknownAgentError", "'stranger'"),
                                   (changed, "AgentMismatchError", "fingerprint")):
            handle = dev_server.run(start_run(dev_server.client, agent, "hi", run_id=run_id(),
                                              task_queue=queue))
            with pytest.raises(WorkflowFailureError) as failed:
                dev_server.run(outcome(handle))
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == kind
            assert cause.non_retryable and named in cause.message


PROGRESSED = threading.Event()
RELEASE = threading.Event()


@function_tool(timeout=10)
def slow(ctx: CallContext) -> str:
    """Reports its progress, then waits to be released."""
    ctx.report_progress("half way", 0.5)
    PROGRESSED.set()
    RELEASE.wait(10)
    return "slow done"


def test_progress_travels_as_the_activitys_heartbeat_details(dev_server: Temporal) -> None:
    PROGRESSED.clear()
    RELEASE.clear()
    model = ScriptedModel([calls(call("slow", id="c1")), "done"])
    agent = TemporalAgent("progress", model, [slow], heartbeat_timeout=0.4)
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "go", run_id=run_id(),
                                          task_queue=queue))

        async def details() -> list[Any]:
            described = await handle.describe()
            found = []
            for pending in described.raw_description.pending_activities:
                found += await dev_server.client.data_converter.decode(
                    pending.heartbeat_details.payloads)
            return found

        try:
            beat = eventually(lambda: dev_server.run(details()), "a heartbeat with progress")
        finally:
            RELEASE.set()
        done = dev_server.run(outcome(handle))
    assert beat == [{"message": "half way", "fraction": 0.5}]
    assert tool_texts(done) == {"c1": "slow done"}


MEETING = threading.Barrier(2, timeout=5)


@function_tool(timeout=10)
def meet(who: str) -> str:
    """Waits for the other call of its batch: only calls that run at once both return."""
    MEETING.wait()
    return f"{who} met"


def test_the_calls_of_one_batch_run_as_concurrent_activities(dev_server: Temporal) -> None:
    MEETING.reset()
    model = ScriptedModel([calls(call("meet", {"who": "a"}, id="c1"),
                                 call("meet", {"who": "b"}, id="c2")), "both met"])
    agent = TemporalAgent("batch", model, [meet])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "meet", run_id=run_id(),
                                          task_queue=queue))
        done = dev_server.run(outcome(handle))
    assert tool_texts(done) == {"c1": "a met", "c2": "b met"}


STARTED = threading.Event()
STOPPED = threading.Event()


@function_tool(timeout=30, isolation="asyncio")
async def wait_forever() -> str:
    """Waits until it is cancelled, and says so."""
    STARTED.set()
    try:
        await asyncio.sleep(3600)
    finally:
        STOPPED.set()
    return "never"


def test_cancelling_the_run_halts_it_and_stops_the_running_call(dev_server: Temporal) -> None:
    STARTED.clear()
    STOPPED.clear()
    model = ScriptedModel([calls(call("wait_forever", id="c1"))])
    agent = TemporalAgent("cancelled", model, [wait_forever], heartbeat_timeout=0.4)
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "wait", run_id=run_id(),
                                          task_queue=queue))
        eventually(STARTED.is_set, "the call starting")
        dev_server.run(handle.cancel())
        done = dev_server.run(outcome(handle))
        assert isinstance(done, Halted) and done.reason == "cancelled"
        eventually(STOPPED.is_set, "the call being stopped")


def test_bad_start_input_is_refused_by_the_client_and_fails_a_raw_run_once(
        dev_server: Temporal) -> None:
    agent = TemporalAgent("strict", ScriptedModel(["never"]), [add])
    with working(dev_server, agent) as queue:
        with pytest.raises(ValueError, match="prompt as a non-empty str"):
            dev_server.run(start_run(dev_server.client, agent, "", run_id=run_id(),
                                     task_queue=queue))
        handle = dev_server.run(dev_server.client.start_workflow(
            WORKFLOW, {"agent": "strict", "fingerprint": agent.fingerprint, "prompt": []},
            id=run_id(), task_queue=queue))
        with pytest.raises(WorkflowFailureError) as failed:
            dev_server.run(outcome(handle))
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "RunStartRefused"
    assert "the message sequence is empty" in cause.message


def test_bad_settings_are_refused_naming_what_to_fix(dev_server: Temporal) -> None:
    model = ScriptedModel(["hi"])
    with pytest.raises(ValueError, match=r"TemporalAgent\.name must be a non-empty str"):
        TemporalAgent("", model)
    with pytest.raises(TypeError, match=r"must have respond\(\) or arespond\(\)"):
        TemporalAgent("no-model", object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="heartbeat_timeout"):
        TemporalAgent("beatless", model, heartbeat_timeout=0)
    with pytest.raises(TypeError, match="non-empty list of TemporalAgent"):
        AgentWorker(dev_server.client, [], task_queue="unused")
    with pytest.raises(ValueError, match=r"AgentWorker\.serves must be one of"):
        AgentWorker(dev_server.client, [TemporalAgent("one", model)], task_queue="unused",
                    serves="tools")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"AgentWorker\.sticky_timeout"):
        AgentWorker(dev_server.client, [TemporalAgent("one", model)], task_queue="unused",
                    sticky_timeout=0)
    twins = [TemporalAgent("twin", model), TemporalAgent("twin", model)]
    with pytest.raises(ValueError, match="two of the worker's agents have the same name"):
        AgentWorker(dev_server.client, twins, task_queue="unused")


@function_tool
def bump(ctx: CallContext) -> int:
    """Adds one to the run's counter."""
    assert ctx.state is not None
    value = ctx.state.get("n", 0) + 1
    ctx.state.set("n", value)
    return int(value)


def test_a_calls_state_writes_are_the_runs_state(dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("bump", id="c1")), calls(call("bump", id="c2")), "2"])
    agent = TemporalAgent("counter", model, [bump])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "count", run_id=run_id(),
                                          task_queue=queue, state={"n": 0}))
        done = dev_server.run(outcome(handle))
    assert (done.state, tool_texts(done)) == ({"n": 2}, {"c1": "1", "c2": "2"})
