"""Progress from a running tool (``ctx.report_progress``): it reaches the run's
``on_progress``, the live view and the call's span from every isolation, never the model; bad
reports are refused where they are made."""

from __future__ import annotations

import io
import json
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console

from tests.support import progress_handlers as ph
from toolvisor import Agent, CallContext, Completed, Ok, Tool, Tracing
from toolvisor.executor import ToolRunner
from toolvisor.isolation import prepare_process_isolation
from toolvisor.observe import Board, live, render
from toolvisor.testing import ScriptedModel, call, calls

pytestmark = pytest.mark.machine_wide  # every isolation: Ray and the sandbox among them


@pytest.fixture(scope="module", autouse=True)
def _process_helpers() -> None:
    prepare_process_isolation()


@pytest.fixture(params=["thread", "asyncio", "process", "ray", "sandbox"])
def isolation(request: pytest.FixtureRequest, ray_cluster: ModuleType) -> str:
    """Where the handler runs; ``ray`` on the session's cluster (started before any test's
    leak snapshot, whichever isolation it runs)."""
    return str(request.param)


def reporting_tool(isolation: str) -> Tool:
    handler: Any = ph.reports_async if isolation == "asyncio" else ph.reports
    return Tool(name="build_report", handler=handler, isolation=isolation)  # type: ignore[arg-type]


def test_progress_reaches_on_progress_the_live_view_and_the_span(isolation: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    told: list[tuple[str, str, dict[str, Any]]] = []
    model = ScriptedModel([calls(call("build_report", {}, id="c1")), "done"])
    out = io.StringIO()
    with live(out), Agent(model, [reporting_tool(isolation)],
                          tracing=Tracing(provider=provider,
                                          on_progress=lambda *told_: told.append(told_))) as agent:
        outcome = agent.run("build it", wait_for=60)
    provider.shutdown()
    assert isinstance(outcome, Completed), outcome

    reports = [data for _, event, data in told if event == "tool_progress"]
    assert reports == [
        {"turn": 1, "tool_name": "build_report", "tool_call_id": "c1", "attempt": 1,
         "message": "read the input", "fraction": None},
        {"turn": 1, "tool_name": "build_report", "tool_call_id": "c1", "attempt": 1,
         "message": "half way", "fraction": 0.5}]
    assert {run_id for run_id, event, _ in told if event == "tool_progress"} \
        == {outcome.run_id}
    lines = out.getvalue().splitlines()
    assert f"run {outcome.run_id[:8]} turn 1 build_report (c1) #1 progress: half way (50%)" \
        in lines
    span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool build_report")
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("tool_progress", {"message": "read the input"}),
        ("tool_progress", {"message": "half way", "fraction": 0.5})]
    # the model is told the result, and nothing of the progress
    result = json.loads(model.requests[-1].messages[-1].content)  # type: ignore[union-attr]
    assert set(result) == {"pid"}
    assert all("half way" not in str(m) for m in model.requests[-1].messages)


def test_progress_outside_a_run_goes_nowhere_and_counts_for_nothing() -> None:
    with ToolRunner() as runner:
        assert runner.run(Tool(name="r", handler=ph.reports), {}).__class__ is Ok
    ctx = CallContext()  # no sink at all: a report is checked, then dropped
    ctx.report_progress("fine", 1)
    ctx.heartbeat()


@pytest.mark.parametrize(("message", "fraction", "error", "says"), [
    (42, None, TypeError, "message must be a str, got int 42"),
    ("x", 1.5, ValueError, "fraction must be None or a number from 0 to 1"),
    ("x", -0.1, ValueError, "got -0.1"),
    ("x", float("nan"), ValueError, "got nan"),
    ("x", True, ValueError, "got True"),
    ("x", "half", ValueError, "got 'half'"),
])
def test_a_bad_report_is_refused_where_it_is_made(message: Any, fraction: Any,
                                                  error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says.replace("(", r"\(").replace(")", r"\)")):
        CallContext().report_progress(message, fraction)


def test_the_live_tree_shows_a_running_calls_last_report_until_the_call_ends() -> None:
    board = Board()
    ids = {"run_id": "run-1", "turn": 1, "tool_name": "build_report", "tool_call_id": "c1",
           "attempt": 1}

    def tree() -> str:
        console = Console(file=io.StringIO(), width=120, color_system=None)
        console.print(render(board))
        return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]

    board.take("call_started", ids)
    board.take("tool_progress", {**ids, "message": "[charts] drawn", "fraction": 0.75})
    assert "build_report c1  #1  running  [charts] drawn (75%)" in tree()  # markup escaped
    board.take("call_finished", {**ids, "outcome": "ok", "duration_ms": 5.0})
    assert "drawn" not in tree()


class Sink:
    """A caller's progress sink: what the runner passed on."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, float | None]] = []
        self.heartbeats = 0

    def report(self, message: str, fraction: float | None) -> None:
        self.reports.append((message, fraction))

    def heartbeat(self) -> None:
        self.heartbeats += 1


def test_the_runner_passes_reports_on_while_the_call_runs_and_drops_them_after() -> None:
    kept: list[CallContext] = []

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        kept.append(ctx)
        ctx.report_progress("working", 0.5)
        ctx.heartbeat()
        return Ok("done")

    sink = Sink()
    with ToolRunner() as runner:
        assert runner.run(Tool(name="t", handler=handler), {}, CallContext(progress=sink)) \
            == Ok("done")
    assert (sink.reports, sink.heartbeats) == ([("working", 0.5)], 1)
    kept[0].report_progress("too late")  # a thread the handler left behind, say
    kept[0].heartbeat()
    assert (sink.reports, sink.heartbeats) == ([("working", 0.5)], 1)
