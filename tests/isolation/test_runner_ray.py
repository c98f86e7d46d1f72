"""``ToolRunner`` under ``ray`` isolation: real Ray tasks on the session's local cluster."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import handlers as h
from toolvisor import (
    Agent,
    CallContext,
    Completed,
    Err,
    Ok,
    Tool,
    ToolCall,
    ToolError,
)
from toolvisor.contract import HandlerResult, InvalidArguments
from toolvisor.executor import ToolRunner
from toolvisor.machine import RetryPolicy
from toolvisor.observe import live
from toolvisor.ray import RayActor
from toolvisor.testing import LeakCheck, ScriptedModel, call, calls

pytestmark = pytest.mark.machine_wide  # Ray: one local cluster at a time


@pytest.fixture
def runner(ray_cluster: ModuleType) -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=20.0) as r:
        yield r


def on_ray(handler: Any, **options: Any) -> Tool:
    return Tool(name=options.pop("name", "r"), handler=handler, isolation="ray", **options)


def error_of(result: HandlerResult) -> ToolError:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason


def test_a_plain_call_and_its_context_cross_back(runner: ToolRunner) -> None:
    ctx = CallContext(tool_call=ToolCall(id="call-3", name="r"))
    assert runner.run(on_ray(h.ok_echo), {"a": [1, 2]}) == Ok({"a": [1, 2]})
    assert runner.run(on_ray(h.call_id), {}, ctx) == Ok("call-3")
    assert runner.run(on_ray(lambda a: Ok(a["x"] * 2)), {"x": 21}) == Ok(42)  # by value


def test_arguments_are_validated_before_anything_is_sent(runner: ToolRunner) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    result = runner.run(on_ray(h.hard_exit, input_schema=schema), {"a": "x"})
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments)
    assert runner.stats.workers_killed == 0


def test_a_raise_is_handler_raised_with_the_original_exception(runner: ToolRunner) -> None:
    error = error_of(runner.run(on_ray(h.raises), {}))
    assert error.reason == "handler_raised"
    assert type(error.cause) is ValueError and str(error.cause) == "boom"


def test_an_unencodable_result_is_encoding_failed(runner: ToolRunner) -> None:
    assert error_of(runner.run(on_ray(h.unencodable), {})).reason == "encoding_failed"


def test_the_worker_exiting_is_handler_exit(runner: ToolRunner) -> None:
    error = error_of(runner.run(on_ray(h.hard_exit), {}))
    assert error.reason == "handler_exit"
    assert error.cause == "WorkerCrashedError"
    assert runner.run(on_ray(h.ok_echo), {"still": "up"}) == Ok({"still": "up"})


def test_a_hang_past_the_deadline_is_a_timeout_and_its_worker_is_killed(
        runner: ToolRunner) -> None:
    error = error_of(runner.run(on_ray(h.hangs_forever, timeout=1.0), {}))
    assert error.reason == "timeout" and error.cause == 1.0
    # A task needing both CPUs of the cluster runs only once the hung one's CPU is free.
    whole = on_ray(h.ok_echo, options={"num_cpus": 2})
    assert runner.run(whole, {"still": "up"}) == Ok({"still": "up"})
    runner.close()  # the deadline's cancel has run by now
    assert runner.stats.workers_killed == 1


class Results:
    """The results of calls started with ``runner.start``, awaited by count."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.got: list[HandlerResult] = []

    def __call__(self, result: HandlerResult) -> None:
        with self._lock:
            self.got.append(result)
            self._lock.notify_all()

    def wait(self, count: int) -> list[HandlerResult]:
        with self._lock:
            assert self._lock.wait_for(lambda: len(self.got) >= count, 60), self.got
            return list(self.got)


class Started:
    """A progress sink that counts the calls that reported "started"."""

    def __init__(self, calls: int) -> None:
        self._calls = calls
        self._lock = threading.Lock()
        self.all = threading.Event()

    def report(self, message: str, fraction: float | None) -> None:
        with self._lock:
            self._calls -= 1
            if self._calls == 0:
                self.all.set()

    def heartbeat(self) -> None:
        pass


@contextlib.contextmanager
def sent_together(runner: ToolRunner) -> Iterator[None]:
    """The calls started inside the block are sent together: meanwhile the sender is busy
    sending a call whose handler's pickling waits until the block ends."""
    held = h.HeldPickling()
    done = Results()
    runner.start(on_ray(held, name="held"), {}, None, done)
    assert held.entered.wait(60)
    try:
        yield
    finally:
        held.release.set()
    assert done.wait(1) == [Ok({})]


def cluster_cpus(ray: ModuleType) -> int:
    return int(ray.cluster_resources()["CPU"])


def test_calls_started_together_share_ray_tasks(
        runner: ToolRunner, ray_cluster: ModuleType) -> None:
    tool, results = on_ray(h.ok_echo), Results()
    with sent_together(runner):
        for n in range(10):
            runner.start(tool, {"n": n}, None, results)
    assert sorted(r.value["n"] for r in results.wait(10) if isinstance(r, Ok)) == list(range(10))
    # the held call's task, then the ten calls in one task per CPU of the cluster
    assert runner.stats.ray_tasks == 1 + cluster_cpus(ray_cluster) < 10


def test_a_hung_call_times_out_while_the_calls_sent_with_it_finish(
        runner: ToolRunner, ray_cluster: ModuleType) -> None:
    assert cluster_cpus(ray_cluster) == 2  # so the hung call and n=1 share a task
    tool, results = on_ray(h.batch_member, timeout=5.0), Results()
    with sent_together(runner):
        for arguments in ({"hang": True}, {"n": 1}, {"n": 2}):
            runner.start(tool, arguments, None, results)
    got = results.wait(3)
    assert sorted(repr(r) for r in got if isinstance(r, Ok)) == ["Ok(value=1)", "Ok(value=2)"], got
    assert [error_of(r).reason for r in got if isinstance(r, Err)] == ["timeout"]
    assert runner.stats.ray_tasks == 3
    # A task needing both CPUs of the cluster runs only once the hung one's CPU is free.
    assert runner.run(on_ray(h.ok_echo, options={"num_cpus": 2}), {}) == Ok({})
    runner.close()  # the deadline's cancel has run by now
    assert runner.stats.workers_killed == 1


def test_a_call_stopped_beside_a_running_sibling_is_killed_once_the_sibling_finishes(
        runner: ToolRunner, ray_cluster: ModuleType, tmp_path: Path) -> None:
    assert cluster_cpus(ray_cluster) == 2  # so the hung call and the reader share a task
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # the reader's open never waits for a writer
    try:
        started = Started(2)
        ctx = CallContext(progress=started)
        tool, hung_result, results = on_ray(h.batch_member, timeout=20.0), Results(), Results()
        with sent_together(runner):
            hung = runner.start(tool, {"hang": True, "report": True}, ctx, hung_result)
            runner.start(tool, {"fifo": str(fifo), "report": True, "n": 1}, ctx, results)
            runner.start(tool, {"n": 2}, None, results)
        assert started.all.wait(60)
        assert hung.cancel()
        assert error_of(hung_result.wait(1)[0]).code == "cancelled"
        assert runner.stats.workers_killed == 0  # the reader still runs in that worker
        os.write(writer, b"go")
        assert sorted(repr(r) for r in results.wait(2)) == ["Ok(value=1)", "Ok(value=2)"]
        assert runner.stats.workers_killed == 1  # the reader is done: the hung call's end
    finally:
        os.close(writer)


def test_ray_options_reach_the_task(runner: ToolRunner) -> None:
    tool = on_ray(h.ok_echo, options={"num_cpus": 2, "resources": {}}, timeout=5.0)
    assert runner.run(tool, {"n": 1}) == Ok({"n": 1})
    too_big = on_ray(h.ok_echo, options={"resources": {"nowhere": 1}}, timeout=1.0)
    assert error_of(runner.run(too_big, {})).reason == "timeout"  # it can never be scheduled


def test_ray_options_are_checked_when_the_tool_is_built() -> None:
    with pytest.raises(ValueError, match=r"unknown options \['num_cpu'\] for isolation='ray'"):
        on_ray(h.ok_echo, options={"num_cpu": 1})
    with pytest.raises(ValueError, match="needs retryable=True"):
        on_ray(h.ok_echo, options={"max_retries": 3})
    with pytest.raises(ValueError, match=r"the option 'actor' is set by RayActor\.tools"):
        on_ray(h.ok_echo, options={"actor": ("not", "an actor")})
    with pytest.raises(ValueError, match=r"isolation='thread' takes no options, got \['num_"):
        Tool(name="t", handler=h.ok_echo, options={"num_cpus": 1})


def test_a_retryable_tool_is_retried_by_the_policy_not_by_ray(
        ray_cluster: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "runs"
    tool = on_ray(h.exits_on_first_attempt, name="flaky", retryable=True)
    model = ScriptedModel([calls(call("flaky", {"log": str(log)}, id="f")), "ok"])
    policy = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.002)
    with Agent(model, [tool], on_tool_error=policy) as agent:
        assert isinstance(agent.run("go"), Completed)
    assert log.read_text().split() == ["1", "2"]  # Ray ran each attempt once


def test_without_ray_a_ray_tool_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ImportError, match=re.escape("pip install '.[ray]' in toolvisor's clone")):
        on_ray(h.ok_echo)


def counter_tools(**options: Any) -> dict[str, Tool]:
    return {t.name: t for t in RayActor(h.Counter, kwargs={"start": 10}, **options).tools()}


def test_a_ray_actor_keeps_its_tools_state_between_calls(runner: ToolRunner) -> None:
    tools = counter_tools()
    assert sorted(tools) == ["add", "crash", "hang"]
    assert runner.run(tools["add"], {}) == Ok(11)
    assert runner.run(tools["add"], {"by": 5}) == Ok(16)


def test_a_dead_actor_is_restarted_within_its_intensity(runner: ToolRunner) -> None:
    tools = counter_tools(max_restarts=1)
    assert runner.run(tools["add"], {}) == Ok(11)
    with live(io.StringIO()) as board:  # the live view counts the rebuild as a restart
        error = error_of(runner.run(tools["crash"], {}))
    assert board.restarts == 1
    assert error.reason == "handler_exit" and error.cause == "ActorDiedError"
    assert runner.run(tools["add"], {}) == Ok(11)  # a fresh actor: its state starts again
    assert error_of(runner.run(tools["crash"], {})).reason == "handler_exit"
    given_up = error_of(runner.run(tools["add"], {}))  # two deaths: past max_restarts=1
    assert given_up.reason == "handler_exit" and given_up.code == "ray_actor_failed"


def test_a_hung_actor_is_killed_at_the_deadline_without_counting(runner: ToolRunner) -> None:
    tools = counter_tools(max_restarts=0)
    assert runner.run(tools["add"], {}) == Ok(11)
    assert error_of(runner.run(tools["hang"], {})).reason == "timeout"
    assert runner.run(tools["add"], {}) == Ok(11)  # rebuilt: a kill is no death


def test_leaks_are_still_caught_beside_the_cluster(ray_cluster: ModuleType) -> None:
    check = LeakCheck()
    with socket.socket() as leaked:
        assert f"socket:[{os.fstat(leaked.fileno()).st_ino}]" in "".join(check.leaks())
    assert check.leaks() == []


def test_a_ray_actor_needs_a_class_with_tool_methods() -> None:
    with pytest.raises(ValueError, match="no @tool or @function_tool method"):
        RayActor(dict)
    with pytest.raises(ValueError, match="max_restarts"):
        RayActor(h.Counter, max_restarts=-1)
    with pytest.raises(ValueError, match="unknown ray_options"):
        RayActor(h.Counter, ray_options={"max_restarts": 5})


def test_a_handler_the_workers_cannot_import_is_not_started_naming_the_module_and_the_fix(
        runner: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's cluster was not given ``tmp_path``: the handler's module, imported here
    through this process's own ``sys.path``, does not exist on the workers."""
    (tmp_path / "driver_only_handlers.py").write_text(
        "from toolvisor import Ok\n\ndef seven(arguments):\n    return Ok(7)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("driver_only_handlers")
    try:
        error = error_of(runner.run(on_ray(module.seven), {}))
    finally:
        del sys.modules["driver_only_handlers"]
    assert (error.reason, error.code) == ("handler_exit", "not_started")
    assert "cannot import module 'driver_only_handlers'" in error.message
    assert "runtime_env" in error.message and "PYTHONPATH" in error.message


LAZY_CLUSTER = """
import sys
sys.path.insert(0, sys.argv[1])  # as pytest puts a test's rootdir on its own path
import ray
from handlers_on_the_drivers_path import seven
from toolvisor import Ok, Tool
from toolvisor.executor import ToolRunner
with ToolRunner() as runner:
    print(runner.run(Tool(name="r", handler=lambda a: Ok(7), isolation="ray"), {}))
    print(ray.is_initialized())
    print(runner.run(Tool(name="s", handler=seven, isolation="ray"), {}))
print(ray.is_initialized())
"""


def test_without_a_cluster_one_is_started_and_shut_down_with_the_runner(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """In a child process: this one's session cluster must not be there. (A short temp dir:
    Ray's socket paths must fit in 107 bytes.)"""
    temp = Path(tempfile.mkdtemp(prefix="tv-lazy-"))  # not pytest's: see ``ray_cluster``
    # A folder the script put on its own sys.path (Ray itself gives its workers only the
    # script's folder and working directory): the workers get it from toolvisor, or `seven`
    # cannot load there.
    app, lib = tmp_path_factory.mktemp("app"), tmp_path_factory.mktemp("lib")
    (lib / "handlers_on_the_drivers_path.py").write_text(
        "from toolvisor import Ok\n\ndef seven(arguments):\n    return Ok(7)\n")
    (app / "main.py").write_text(LAZY_CLUSTER)
    try:
        done = subprocess.run([sys.executable, str(app / "main.py"), str(lib)],
                              capture_output=True, text=True, cwd=temp,
                              env={**os.environ, "RAY_TMPDIR": str(temp)}, timeout=120,
                              check=False)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert done.stdout.split("\n")[:4] == ["Ok(value=7)", "True", "Ok(value=7)", "False"], \
        done.stdout + done.stderr[-2000:]
