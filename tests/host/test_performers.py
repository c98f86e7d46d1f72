"""The effect performers drive a run's ``TurnMachine`` with no orchestrator: one model request
(``ModelPerformer``) and one tool call (``ToolCallPerformer``) performed directly, with the
agent's real model calls, the real runner, a real gate and real spans, as a workflow's
activities would."""

from __future__ import annotations

import threading
import time
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolvisor import (
    Bulkhead,
    CallContext,
    Completed,
    Err,
    ModelError,
    Ok,
    Resilience,
    function_tool,
)
from toolvisor.call import OutputProjection
from toolvisor.contract import ModelRequest, ToolResultMessage
from toolvisor.executor import ToolRunner
from toolvisor.host import (
    ModelCalls,
    ModelPerformer,
    RunCatalog,
    ToolCallPerformer,
    ToolGates,
    tracing_for,
)
from toolvisor.machine import (
    CallToRun,
    Done,
    Effect,
    LlmCall,
    MachineConfig,
    ModelReplied,
    NotPerformed,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.registry import ToolRegistry
from toolvisor.testing import FunctionModel, call, calls


@function_tool
def add(a: int, b: int, ctx: CallContext) -> int:
    """Add two numbers, saying so and keeping the sum in the run's state.

    Args:
        a: the first number.
        b: the second number.
    """
    ctx.report_progress("adding", 0.5)
    ctx.state.set("last_sum", a + b)
    return a + b


def answer(request: ModelRequest) -> Any:
    """Ask for ``add`` until a tool result is in the transcript; then say it."""
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return f"the sum is {results[-1].content}" if results else calls(
        call("add", {"a": 1, "b": 2}, id="c1"))


def one(effects: list[Effect], kind: type[Any]) -> Any:
    found = [e for e in effects if isinstance(e, kind)]
    assert len(found) == 1, effects
    return found[0]


def test_a_model_request_and_a_tool_call_drive_a_run_without_an_orchestrator() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = tracing_for(FunctionModel(answer), provider, agent_name="adder",
                        record_content=False)
    assert spans is not None
    progress: list[tuple[str, str, dict[str, Any]]] = []
    model = FunctionModel(answer)
    machine = TurnMachine(MachineConfig(tools=(add,)))
    catalog = RunCatalog("run-1", ToolRegistry.from_tools([add]), {})
    with ToolRunner() as runner:
        models = ModelPerformer(ModelCalls(model, runner, 5.0), OutputProjection())
        tools = ToolCallPerformer(
            runner, gates=ToolGates({"add": Resilience(bulkhead=Bulkhead(max_concurrent=1))}),
            spans=spans, on_progress=lambda *report: progress.append(report))
        run_span = spans.run_started("run-1", resumed=False)

        replied = models.perform("run-1", one(machine.start("add 1 and 2"), LlmCall), catalog)
        assert isinstance(replied, ModelReplied)
        asked = one(machine.send(replied), ToolCalls)
        outcome = tools.perform("run-1", add, asked.calls[0], run_span=run_span)
        assert (outcome.call_id, outcome.result, outcome.text) == ("c1", Ok(3), "3")
        assert outcome.writes == {"last_sum": 3}  # the call's state writes go to the machine
        effects = machine.send(ToolResults(asked.id, (outcome,)))
        final = models.perform("run-1", one(effects, LlmCall), catalog)
        done = one(machine.send(final), Done)
        spans.run_finished(run_span, "completed", None)
    provider.shutdown()

    assert isinstance(done.outcome, Completed) and done.outcome.text == "the sum is 3"
    assert machine.state == {"last_sum": 3}
    assert [t.name for t in model.requests[0].tools] == ["add"]  # the run's catalog offered it
    assert [(run, event, data["message"]) for run, event, data in progress] == [
        ("run-1", "tool_progress", "adding")]
    finished = {s.name: s for s in exporter.get_finished_spans()}
    tool_span, run = finished["execute_tool add"], finished["invoke_agent adder"]
    assert tool_span.parent is not None and tool_span.parent.span_id == run.context.span_id
    assert [e.name for e in tool_span.events] == ["tool_progress"]


def test_a_failed_model_request_is_not_performed_and_a_full_gate_refuses_a_call() -> None:
    def broken(request: ModelRequest) -> Any:
        raise ModelError("rate_limited", "slow down")

    entered, release = threading.Event(), threading.Event()

    @function_tool
    def hold(ctx: CallContext) -> str:
        """Hold the tool's one slot until released."""
        entered.set()
        release.wait(10)
        return "held"

    machine = TurnMachine(MachineConfig(tools=(hold,)))
    catalog = RunCatalog("run-2", ToolRegistry.from_tools([hold]), {})
    with ToolRunner() as runner:
        failed = ModelPerformer(ModelCalls(FunctionModel(broken), runner, 5.0),
                                OutputProjection()).perform(
            "run-2", one(machine.start("go"), LlmCall), catalog)
        assert isinstance(failed, NotPerformed)
        assert isinstance(failed.error, ModelError) and failed.error.reason == "rate_limited"

        tools = ToolCallPerformer(runner, gates=ToolGates(
            {"hold": Resilience(bulkhead=Bulkhead(max_concurrent=1, max_queue=0))}))
        planned = [machine_call(machine, f"c{n}") for n in (1, 2)]
        first: list[Any] = []
        holder = threading.Thread(
            target=lambda: first.append(tools.perform("run-2", hold, planned[0])))
        holder.start()
        try:
            assert entered.wait(10)
            second = tools.perform("run-2", hold, planned[1])
        finally:
            release.set()
            holder.join(10)
    assert isinstance(second.result, Err) and second.result.reason.code == "bulkhead_full"
    assert first[0].result == Ok("held")


def machine_call(machine: TurnMachine, call_id: str) -> CallToRun:
    """A planned call of ``hold`` for the performer (its turn and attempt as the machine's)."""
    return CallToRun(call=call("hold", {}, id=call_id), turn=1, attempt=1, state=machine.state)


def queued(gates: ToolGates) -> int:
    """How many calls wait at ``hold``'s bulkhead."""
    bulkhead = gates.state().tools["hold"].bulkhead
    assert bulkhead is not None
    return bulkhead.queued


def test_a_call_waiting_at_its_gate_starts_when_the_call_before_it_ends() -> None:
    entered, release = threading.Semaphore(0), threading.Event()

    @function_tool
    def hold(ctx: CallContext) -> str:
        """Hold the tool's one slot until released."""
        entered.release()
        release.wait(10)
        return "held"

    gates = ToolGates({"hold": Resilience(bulkhead=Bulkhead(max_concurrent=1, max_queue=1))})
    machine = TurnMachine(MachineConfig(tools=(hold,)))
    outcomes: dict[str, Any] = {}
    with ToolRunner() as runner:
        tools = ToolCallPerformer(runner, gates=gates)

        def perform(call_id: str) -> None:
            outcomes[call_id] = tools.perform("run-3", hold, machine_call(machine, call_id))

        threads = [threading.Thread(target=perform, args=(f"c{n}",)) for n in (1, 2)]
        threads[0].start()
        assert entered.acquire(timeout=10)  # c1 holds the slot
        threads[1].start()
        waited = time.monotonic() + 10
        while queued(gates) != 1 and time.monotonic() < waited:  # c2 comes to wait at the gate
            release.wait(0.01)
        assert queued(gates) == 1
        release.set()  # c1 ends: its slot lets c2 in
        for thread in threads:
            thread.join(10)
    assert {c: o.result for c, o in outcomes.items()} == {"c1": Ok("held"), "c2": Ok("held")}
