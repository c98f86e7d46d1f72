"""Isolation is a plug-in: a backend registered from outside runs tools, through the runner and
the agent, with its options checked by it alone (neither ``contract`` nor the runner knows it)."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from toolvisor import Agent, Completed, Ok, Tool, function_tool
from toolvisor.call import execute
from toolvisor.contract import HandlerResult, ToolResultMessage
from toolvisor.executor import ToolRunner
from toolvisor.isolation import (
    IsolationBackend,
    RunningCall,
    Runtime,
    ThreadBackend,
    register_backend,
    registered_backends,
)
from toolvisor.testing import ScriptedModel, call, calls

THREAD_NAME = "one-thread-backend"


class OneThread(IsolationBackend):
    """Runs every call, one at a time, on one thread of its own (started on the first call);
    options: ``label``, a string the handler's result does not see."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._calls: queue.SimpleQueue[RunningCall | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _thread
        self._thread: threading.Thread | None = None

    @classmethod
    def check(cls, tool: Tool) -> None:
        options = dict(tool.options or {})
        label = options.pop("label", "")
        if options or not isinstance(label, str):
            raise ValueError(f"tool {tool.name!r}: one_thread takes only a string 'label', "
                             f"got {tool.options!r}")

    def submit(self, call: RunningCall) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=THREAD_NAME)
                self._thread.start()
        self._calls.put(call)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            if call.settled:
                continue
            self.runtime.arm(call)
            self.runtime.settle(call, execute(call.tool, call.arguments, call.ctx))

    def stop(self, call: RunningCall) -> None:
        """A thread cannot be stopped: the runner has delivered the call's result already."""

    def close(self, grace: float) -> None:
        with self._lock:
            thread = self._thread
        if thread is not None:
            self._calls.put(None)
            thread.join()


if "one_thread" not in registered_backends():  # registered once per process
    register_backend("one_thread", OneThread)


def where(arguments: Any) -> HandlerResult:
    return Ok(threading.current_thread().name)


def test_a_registered_backend_runs_its_tools_calls() -> None:
    here = Tool(name="where", handler=where, isolation="one_thread", options={"label": "x"})
    assert here.options == {"label": "x"} and not ToolRunner.runs_here(here)
    with ToolRunner() as runner:
        assert runner.run_batch([(here, {}, None), (here, {}, None)]) \
            == [Ok(THREAD_NAME), Ok(THREAD_NAME)]
        assert runner.stats.calls_finished == 2


def test_an_agent_runs_a_tool_on_a_registered_backend() -> None:
    @function_tool(isolation="one_thread")
    def locate() -> str:
        """Where the handler runs."""
        return threading.current_thread().name

    model = ScriptedModel([calls(call("locate", {})), "done"])
    with Agent(model, [locate]) as agent:
        outcome = agent.run("where?")
    assert isinstance(outcome, Completed) and outcome.text == "done"
    answers = [m.content for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert answers == [THREAD_NAME]


def test_the_backend_alone_checks_its_options_when_the_tool_is_built() -> None:
    with pytest.raises(ValueError, match="one_thread takes only a string 'label'"):
        Tool(name="where", handler=where, isolation="one_thread", options={"cpus": 1})
    with pytest.raises(ValueError, match=r"async def handler needs isolation='asyncio'"):
        Tool(name="later", handler=_coroutine, isolation="one_thread")


def test_an_isolation_nobody_registered_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"isolation must be .*'one_thread'.*got 'vm'"):
        Tool(name="where", handler=where, isolation="vm")


def test_a_name_has_one_backend_and_a_backend_is_an_isolation_backend() -> None:
    with pytest.raises(ValueError, match="isolation 'thread' already has a backend"):
        register_backend("thread", ThreadBackend)
    with pytest.raises(TypeError, match="needs an IsolationBackend subclass"):
        register_backend("mine", object)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be an identifier"):
        register_backend("my backend", OneThread)


def test_a_runner_knows_the_backends_registered_before_it_was_built() -> None:
    late = f"late{len(registered_backends())}"  # a new name each time
    with ToolRunner() as runner:
        register_backend(late, type("Late", (OneThread,), {}))
        tool = Tool(name="where", handler=where, isolation=late)
        with pytest.raises(LookupError, match=f"{late!r} was registered after this ToolRunner"):
            runner.start(tool, {}, None, lambda result: None)
        assert runner.stats.calls_started == 0
    with ToolRunner() as runner:
        assert runner.run(tool, {}) == Ok(THREAD_NAME)


async def _coroutine(arguments: Any) -> HandlerResult:
    return Ok()
