"""A supervisor's restarts in the trace: an MCP server dies mid-run, and its connection's
restart is an event of the run's span (and counted by the live view); with no run in flight,
a restart and the give-up are spans of their own. Real stdio servers, killed for real."""

from __future__ import annotations

import io

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.events import Events
from tests.support.local_mcp import stdio
from toolvisor import Agent, Completed, Tracing, function_tool
from toolvisor.observe import live
from toolvisor.testing import ScriptedModel, call, calls


def test_a_connection_restarted_mid_run_is_an_event_of_the_run_span(
        events: Events, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans

    @function_tool
    def until_restarted() -> str:
        """Keeps the run in flight until the dead server's connection is back."""
        events.wait_for("child_restarted", supervisor_id="mcp:local")
        return "back"

    model = ScriptedModel([calls(call("die", {}, id="d"), call("until_restarted", {}, id="w")),
                           "done"])
    with live(io.StringIO()) as board, Agent(model, [until_restarted, stdio()],
                                             tracing=Tracing(provider=provider)) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Completed)
    assert board.restarts == 1  # the live view's count is fed by the same restart
    finished = exporter.get_finished_spans()
    (run,) = [s for s in finished if s.name == "invoke_agent agent"]
    (restart,) = [e for e in run.events if e.name == "supervisor.child_restarted"]
    attributes = dict(restart.attributes or {})
    assert attributes.pop("reason").startswith("McpConnectionError(")
    assert str(attributes.pop("child_urn")).startswith("urn:uuid:")
    assert attributes == {"supervisor_id": "mcp:local", "child_id": "connection",
                          "restarts": 1}
    assert not [s for s in finished if s.name.startswith("supervisor ")]


def test_with_no_run_in_flight_a_restart_and_a_give_up_are_spans_of_their_own(
        events: Events, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    doomed = stdio("--doomed", max_restarts=1, max_seconds=120)
    with Agent(ScriptedModel([]), [doomed], name="idle", tracing=Tracing(provider=provider)):
        events.wait_for("restart_intensity_exceeded", supervisor_id="mcp:local")
        finished = exporter.get_finished_spans()
    told = [(s.name, dict(s.attributes or {}), [(e.name, dict(e.attributes or {}))
                                                for e in s.events]) for s in finished]
    assert [(name, attributes) for name, attributes, _ in told] == [
        ("supervisor child_restarted",
         {"gen_ai.agent.name": "idle", "toolvisor.supervisor.id": "mcp:local"}),
        ("supervisor restart_intensity_exceeded",
         {"gen_ai.agent.name": "idle", "toolvisor.supervisor.id": "mcp:local"}),
    ]
    (restarted,), (gave_up,) = (events_ for _, _, events_ in told)
    assert restarted[0] == "supervisor.child_restarted"
    assert (restarted[1]["child_id"], restarted[1]["restarts"]) == ("connection", 1)
    assert gave_up[0] == "supervisor.restart_intensity_exceeded"
    assert (gave_up[1]["max_restarts"], gave_up[1]["max_seconds"]) == (1, 120)
