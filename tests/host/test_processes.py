"""Background processes (``ctx.processes``): started by a call, read by a later turn or the
host, cancelled with their run unless detached, and with a store kept across a real SIGKILL of
the host (an output is never recomputed; a process that was running runs again only if it may:
at most once)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.programs import process_host as host
from tests.support.hosts import ROOT, Start, kill, next_line, started_hosts
from toolvisor import (
    Agent,
    CallContext,
    CapabilityError,
    Err,
    Ok,
    ProcessError,
    ProcessInfo,
    Tool,
    ToolError,
    Tracing,
    UnknownRunError,
)
from toolvisor.contract import ModelResponse
from toolvisor.durable import SqliteRunStore, process_records
from toolvisor.testing import ScriptedModel, call, calls


def read_text(outcome: Any, call_id: str) -> str:
    """What the model was shown for ``call_id``."""
    (text,) = [m.content for m in outcome.messages if getattr(m, "tool_call_id", None) == call_id]
    return str(text)


def two_turns_later(start: str, read: str, arguments: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel([calls(call(start, arguments, id="c_start")),
                          calls(call("chat", {}, id="c_chat")),
                          calls(call(read, {}, id="c_read")),
                          ModelResponse(text="done")])


@pytest.mark.parametrize(("start", "read", "isolation"), [
    ("start_report_in", "read_report", "thread"),
    ("start_report_in", "read_report_async", "asyncio"),
    ("start_report_in", "read_report", "process"),
    ("start_report_in", "read_report", "tool"),
    ("start_report_remote", "read_report_remote", None),
])
def test_a_process_started_by_a_call_is_read_two_turns_later(
        start: str, read: str, isolation: str | None) -> None:
    arguments = {"quarter": "Q3"} if isolation is None else {"quarter": "Q3",
                                                             "isolation": isolation}
    with Agent(two_turns_later(start, read, arguments), host.TOOLS) as agent:
        outcome = agent.run("build the report")
        assert outcome.text == "done"
        name, output = {"asyncio": ("build_report_async", "report Q3"),
                        "tool": ("summary", "summary Q3")}.get(str(isolation),
                                                               ("build_report", "report Q3"))
        assert read_text(outcome, "c_read") == output
        handle = outcome.state["report"]
        assert handle == f"{outcome.run_id}/1.1.c_start/p1"
        assert agent.processes(outcome.run_id).list() == [
            ProcessInfo(handle, name, "ok", detached=False)]
        assert agent.processes(outcome.run_id).wait(handle) == Ok(output)


def test_a_ray_task_starts_a_ray_process_read_two_turns_later(ray_cluster: ModuleType) -> None:
    """The caller runs as a Ray task (its ctx.processes over the link), and so does the
    process it starts."""
    tools = [*host.TOOLS, Tool(name="start_on_ray", handler=host.start_report_in,
                               input_schema=host.OPEN, isolation="ray")]
    model = two_turns_later("start_on_ray", "read_report", {"quarter": "Q4", "isolation": "ray"})
    with Agent(model, tools) as agent:
        outcome = agent.run("go")
        assert read_text(outcome, "c_read") == "report Q4"
        (info,) = agent.processes(outcome.run_id).list()
        assert (info.name, info.status) == ("build_report", "ok")


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_a_process_progress_reaches_on_progress(isolation: str) -> None:
    told: list[dict[str, Any]] = []
    model = two_turns_later("start_report_in", "read_report",
                            {"quarter": "Q3", "isolation": isolation, "reporting": True})
    with Agent(model, host.TOOLS, tracing=Tracing(
            on_progress=lambda run_id, event, data: told.append(data)
            if event == "tool_progress" else None)) as agent:
        outcome = agent.run("go")
    assert read_text(outcome, "c_read") == "reported"
    handle = outcome.state["report"]
    assert [(d["message"], d["fraction"], d["process"], d["tool_call_id"], d["turn"])
            for d in told] == [("half", 0.5, handle, "1.1.c_start/p1", 1),
                               ("all", 1.0, handle, "1.1.c_start/p1", 1)]


def test_a_run_that_ends_cancels_its_processes() -> None:
    def start(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(ctx.processes.start(host.until_cancelled, {}))

    model = ScriptedModel([calls(call("start", {}, id="c_start")), ModelResponse(text="done")])
    with Agent(model, [Tool(name="start", handler=start)]) as agent:
        outcome = agent.run("go")
        handle = read_text(outcome, "c_start")
        ended = agent.processes(outcome.run_id).wait(handle)
        assert isinstance(ended, Err) and isinstance(ended.reason, ToolError)
        assert (ended.reason.reason, ended.reason.code) == ("handler_exit", "cancelled")
        assert agent.processes(outcome.run_id).list()[0].status == "error"


def test_a_detached_process_outlives_its_run_and_shows_in_the_runs_list(
        tmp_path: Path) -> None:
    def start(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(ctx.processes.start(host.gated, {}, detached=True))

    model = ScriptedModel([calls(call("start", {}, id="c_start")), ModelResponse(text="done")])
    store = tmp_path / "runs.sqlite"
    host.GATE.clear()
    with Agent(model, [Tool(name="start", handler=start)], store=store) as agent:
        outcome = agent.run("go")
        handle = read_text(outcome, "c_start")
        processes = agent.processes(outcome.run_id)
        assert processes.wait(handle, timeout=0) is None  # still running after its run
        assert processes.list() == [ProcessInfo(handle, "gated", "running", detached=True)]
        (line,) = runs_json(store)
        assert line["processes"] == [{"handle": handle, "name": "gated", "status": "running",
                                      "detached": True}]
        assert "1 (1 running, 1 detached)" in runs_table(store)
        run_supervisor = supervised_by(agent, outcome.run_id)
        assert run_supervisor.count_children()["active"] == 1  # the process's actor
        host.GATE.set()
        assert processes.wait(handle) == Ok("opened")
        assert run_supervisor.actor_stopped.wait(10)  # its run's last process ended
        assert processes.cancel(handle) is False  # it ended already


def supervised_by(agent: Agent, run_id: str) -> Any:
    """The run's own process supervisor, a child of the tree's ``processes`` supervisor."""
    (tree,) = [c.ref for c in agent.supervisor.which_children() if c.id == "processes"]
    assert tree is not None
    (run,) = tree.which_children()
    assert run.id[:2] == ("processes", run_id) and run.ref is not None
    return run.ref


def test_the_host_cancels_a_process(tmp_path: Path) -> None:
    def start(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(ctx.processes.start(host.gated, {}, detached=True))

    model = ScriptedModel([calls(call("start", {}, id="c_start")), ModelResponse(text="done")])
    host.GATE.clear()
    with Agent(model, [Tool(name="start", handler=start)], store=tmp_path / "s.db") as agent:
        outcome = agent.run("go")
        handle = read_text(outcome, "c_start")
        assert agent.processes(outcome.run_id).cancel(handle) is True
        ended = agent.processes(outcome.run_id).wait(handle)
        assert isinstance(ended, Err) and ended.reason.code == "cancelled"
        assert process_records(agent.store, outcome.run_id)[handle].status == "error"


def test_bad_uses_are_refused_each_with_its_reason(tmp_path: Path) -> None:
    kept: list[CallContext] = []

    def local(arguments: dict[str, Any]) -> Ok:
        return Ok(arguments)

    def misuse(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        kept.append(ctx)
        refused = {}
        for name, attempt in {
            "local_in_a_worker": lambda: ctx.processes.start(local, {}, isolation="process"),
            "not_callable": lambda: ctx.processes.start(42, {}),  # type: ignore[arg-type]
            "not_a_dict": lambda: ctx.processes.start(host.build_report, [1]),  # type: ignore[arg-type]
            "unknown_name": lambda: ctx.processes.start("tests.programs.process_host:missing", {}),
            "tool_with_settings": lambda: ctx.processes.start(
                host.summary, {}, isolation="thread"),
            "not_json": lambda: ctx.processes.start(host.build_report, {"x": object()}),
            "unknown_handle": lambda: ctx.processes.wait(f"{ctx.session_id}/nope"),
            "not_a_handle": lambda: ctx.processes.wait(42),  # type: ignore[arg-type]
            "other_run": lambda: ctx.processes.cancel("another-run/1.1.c/p1"),
        }.items():
            try:
                attempt()
            except (TypeError, ValueError, CapabilityError) as exc:
                refused[name] = f"{type(exc).__name__}: {exc}"
        return Ok(refused)

    model = ScriptedModel([calls(call("misuse", {}, id="c")), ModelResponse(text="done")])
    with Agent(model, [Tool(name="misuse", handler=misuse)], store=tmp_path / "s.db") as agent:
        outcome = agent.run("go")
        refused = json.loads(read_text(outcome, "c"))
        assert "a module-level function" in refused["local_in_a_worker"]
        assert refused["not_callable"] == "TypeError: a process runs a function or a Tool, got 42"
        assert refused["not_a_dict"].startswith("TypeError: a process's arguments are a dict")
        assert refused["unknown_name"].startswith(
            "ValueError: process function tests.programs.process_host:missing cannot be found")
        assert "brings its own isolation" in refused["tool_with_settings"]
        assert refused["not_json"].startswith("ProcessError: process_not_json")
        assert refused["unknown_handle"].startswith("ProcessError: process_unknown_handle")
        assert refused["not_a_handle"].startswith("ProcessError: process_unknown_handle")
        assert refused["other_run"].startswith("ProcessError: process_other_run")

        with pytest.raises(ProcessError) as ended:
            kept[0].processes.start(host.build_report, {"quarter": "Q1"})
        assert ended.value.code == "process_call_finished"
        with pytest.raises(UnknownRunError):
            agent.processes("no-such-run")
    with pytest.raises(CapabilityError) as missing:
        CallContext().processes.start(host.build_report, {})
    assert missing.value.code == "processes_unavailable"


def test_a_wait_ends_when_its_call_does() -> None:
    refused: list[ProcessError] = []
    done = threading.Event()

    def waiter(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        handle = ctx.processes.start(host.gated, {}, detached=True)
        try:
            ctx.processes.wait(handle)
        except ProcessError as exc:
            refused.append(exc)
        done.set()
        return Ok("late")

    host.GATE.clear()
    model = ScriptedModel([calls(call("waiter", {}, id="c")), ModelResponse(text="done")])
    with Agent(model, [Tool(name="waiter", handler=waiter, timeout=0.2)]) as agent:
        outcome = agent.run("go")
        assert '"reason":"timeout"' in read_text(outcome, "c")
        assert done.wait(10)
        host.GATE.set()
    assert [exc.code for exc in refused] == ["process_wait_cancelled"]


def test_another_agent_on_the_store_waits_for_a_process_but_cannot_cancel_it(
        tmp_path: Path) -> None:
    def start(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(ctx.processes.start(host.gated, {}, detached=True))

    store = tmp_path / "runs.sqlite"
    model = ScriptedModel([calls(call("start", {}, id="c_start")), ModelResponse(text="done")])
    host.GATE.clear()
    with Agent(model, [Tool(name="start", handler=start)], store=store) as first, \
            Agent(ScriptedModel([]), store=store) as second:
        outcome = first.run("go")
        handle = read_text(outcome, "c_start")
        elsewhere = second.processes(outcome.run_id)
        assert elsewhere.wait(handle, timeout=0) is None
        with pytest.raises(ProcessError) as refused:
            elsewhere.cancel(handle)
        assert refused.value.code == "process_running_elsewhere"
        host.GATE.set()
        assert elsewhere.wait(handle) == Ok("opened")  # read from the store


# --- across a SIGKILL of the host ------------------------------------------------------------

@pytest.fixture
def start_host() -> Iterator[Start]:
    with started_hosts("tests.programs.process_host") as start:
        yield start


def resumed(*args: Any) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tests.programs.process_host", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    data: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return data


def cli(*args: Any) -> str:
    done = subprocess.run([sys.executable, "-m", "toolvisor.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def runs_json(store: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cli("runs", "--store", store, "--json").splitlines()]


def runs_table(store: Path) -> str:
    return cli("runs", "--store", store)


def test_an_output_survives_a_sigkill_of_the_host_and_is_not_recomputed(
        tmp_path: Path, start_host: Start) -> None:
    store = tmp_path / "runs.sqlite"
    first = start_host("report", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "hold"}  # turn 2, once the report was built
    kill(first)
    assert host.runs(tmp_path, "build") == 1
    (line,) = runs_json(store)
    (process,) = line["processes"]
    assert process["name"] == "build_report" and not process["detached"]

    assert resumed("report", "resume", store, tmp_path, run_id)["outcome"] == {
        "kind": "completed", "read": ["report Q3"]}
    assert host.runs(tmp_path, "build") == 1  # read back from the store, never built again
    with SqliteRunStore(store) as opened:
        events = [e.type for e in opened.process_events(run_id)]
    assert events.count("report_built") == 1 and events.count("process_ended") == 1


def test_processes_running_at_a_sigkill_run_again_only_if_they_may(
        tmp_path: Path, start_host: Start) -> None:
    store = tmp_path / "runs.sqlite"
    first = start_host("interrupted", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "hold"}  # both processes ran their effect
    kill(first)
    assert "2 (2 running, 0 detached)" in runs_table(store)

    outcome = resumed("interrupted", "resume", store, tmp_path, run_id)["outcome"]
    assert outcome["kind"] == "completed"
    assert json.loads(outcome["read"][0]) == {"once": "interrupted", "retry": "retry done"}
    assert (host.runs(tmp_path, "once"), host.runs(tmp_path, "retry")) == (1, 2)
    with SqliteRunStore(store) as opened:
        statuses = [r.status for r in process_records(opened, run_id).values()]
    assert statuses == ["interrupted", "ok"]


def test_a_call_run_again_that_starts_another_process_in_its_place_is_refused(
        tmp_path: Path, start_host: Start) -> None:
    store = tmp_path / "runs.sqlite"
    first = start_host("varying", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "varying"}
    kill(first)
    (told,) = resumed("varying", "resume", store, tmp_path, run_id)["outcome"]["read"]
    assert "process_replay_mismatch" in told
    with SqliteRunStore(store) as opened:
        (record,) = process_records(opened, run_id).values()
    assert record.spec["arguments"] == {"quarter": "Q1"}  # the process it started first


def test_closing_the_agent_cancels_even_a_detached_process(tmp_path: Path) -> None:
    def start(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(ctx.processes.start(host.gated, {}, detached=True))

    store = tmp_path / "runs.sqlite"
    model = ScriptedModel([calls(call("start", {}, id="c_start")), ModelResponse(text="done")])
    host.GATE.clear()
    with Agent(model, [Tool(name="start", handler=start)], store=store) as agent:
        outcome = agent.run("go")
        handle = read_text(outcome, "c_start")
    with SqliteRunStore(store) as opened:
        record = process_records(opened, outcome.run_id)[handle]
    assert record.ended is not None and record.ended["tool_error"]["code"] == "cancelled"
