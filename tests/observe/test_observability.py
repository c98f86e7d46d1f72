"""Log events and traces of a run with a crash, a timeout, a retry, a question and a resume:
the events match the table in docs/observability.md, the spans form the documented tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.support.event_table import documented_events
from tests.support.observed_run import ask, observed_run
from toolvisor import Agent, Limits, Ok, Tool, Tracing, function_tool
from toolvisor.contract import ModelRequest
from toolvisor.host import tracing_for
from toolvisor.resilience import Breaker, Resilience
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls, capture_events

CALL_IDS = {"run_id", "turn", "tool_name", "tool_call_id", "attempt", "isolation"}


def test_the_events_of_a_run_are_the_documented_ones() -> None:
    with capture_events() as events:
        observed_run()
    rows = documented_events()
    for event in events:
        name = event["event"]
        assert name in rows, f"{name} is not in docs/observability.md"
        row = rows[name]
        assert event["component"] in row["components"], event
        assert event["level"] in row["levels"], event
        fields = set(event) - {"event", "level", "component"}
        if not row["open"]:
            assert fields <= row["fields"], (name, fields - row["fields"])
    emitted = {e["event"] for e in events}
    assert {name for name, row in rows.items() if row["seen"]} <= emitted
    for event in events:
        if event["component"] == "tool_call":
            assert set(event) >= CALL_IDS and event["run_id"] is not None, event


def test_call_finished_says_how_each_call_ended() -> None:
    with capture_events() as events:
        observed_run()
    finished = {(e["tool_name"], e["attempt"], e["turn"]): (e["outcome"], e["level"])
                for e in events if e["event"] == "call_finished"}
    assert finished == {
        ("crash", 1, 1): ("handler_raised", "warning"),
        ("slow", 1, 1): ("timeout", "warning"),
        ("flaky", 1, 1): ("handler_raised", "warning"),
        ("flaky", 2, 1): ("ok", "info"),
        ("ask", 1, 1): ("ask_user", "info"),
    }
    assert all(e["duration_ms"] >= 0 for e in events if e["event"] == "call_finished")
    models = [(e["turn"], e["attempt"], e["outcome"]) for e in events
              if e["event"] == "model_call_finished"]
    assert models == [(1, 1, "rate_limited"), (1, 2, "ok"), (2, 1, "ok")]
    started = [(e["turn"], e["attempt"]) for e in events if e["event"] == "model_call_started"]
    assert started == [(1, 1), (1, 2), (2, 1)]  # built only while a sink listens, as here
    assert {"turn_started", "model_replied", "call_finished"} <= {
        e["progress"] for e in events if e["event"] == "run_progress"}


def tree(finished: tuple[ReadableSpan, ...]) -> list[tuple[str, list[str]]]:
    """Each run span's name with its children's names (in start order)."""
    runs = sorted((s for s in finished if s.parent is None), key=lambda s: s.start_time or 0)
    return [(run.name, [s.name for s in sorted(
        (s for s in finished if s.parent is not None and s.parent.span_id == run.context.span_id),
        key=lambda s: s.start_time or 0)]) for run in runs]


def test_a_run_is_one_trace_tree(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    observed_run(tracing=Tracing(provider=provider), name="planner")
    finished = exporter.get_finished_spans()
    shape = tree(finished)
    assert [name for name, _ in shape] == ["invoke_agent planner"] * 2
    first, second = (children for _, children in shape)
    assert first[:2] == ["chat ScriptedModel"] * 2
    assert sorted(first[2:]) == sorted(["execute_tool crash", "execute_tool slow",
                                        "execute_tool flaky", "execute_tool ask",
                                        "execute_tool flaky"])
    assert second == ["chat ScriptedModel"]
    assert len({s.context.trace_id for s in finished}) == 2  # one trace per run and resume
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    run1, run2 = sorted(by_name["invoke_agent planner"], key=lambda s: s.start_time or 0)
    assert run1.attributes is not None and run2.attributes is not None
    assert run1.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run1.attributes["toolvisor.run.outcome"] == "suspended"
    assert (run1.attributes["toolvisor.run.resumed"], run2.attributes["toolvisor.run.resumed"]) \
        == (False, True)
    assert run2.attributes["toolvisor.run.outcome"] == "completed"
    events = [e.name for e in run1.events]
    assert {"model_call_failed", "model_retry_scheduled", "tool_failed", "retry_scheduled",
            "run_suspended"} <= set(events)
    decisions = {(e.attributes or {}).get("tool_name"): (e.attributes or {}).get("decision")
                 for e in run1.events if e.name == "tool_failed"}
    assert decisions == {"crash": "ContinueRun", "slow": "ContinueRun", "flaky": "RetryAfter"}

    def tool(name: str, attempt: int) -> ReadableSpan:
        return next(s for s in by_name[f"execute_tool {name}"]
                    if (s.attributes or {})["toolvisor.attempt"] == attempt)

    for name, attempt, error in [("crash", 1, "handler_raised"), ("slow", 1, "timeout"),
                                 ("flaky", 1, "handler_raised")]:
        span = tool(name, attempt)
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == error
    for name, attempt in [("flaky", 2), ("ask", 1)]:
        span = tool(name, attempt)
        assert span.status.status_code is StatusCode.UNSET
        assert "error.type" not in (span.attributes or {})
    attributes = tool("ask", 1).attributes or {}
    assert attributes["gen_ai.tool.call.id"] == "a" and attributes["gen_ai.tool.type"] \
        == "function" and attributes["toolvisor.call.outcome"] == "ask_user"
    assert "gen_ai.tool.call.arguments" not in attributes  # content only when asked for
    chats = sorted(by_name["chat ScriptedModel"], key=lambda s: s.start_time or 0)
    assert [(c.attributes or {}).get("error.type") for c in chats] \
        == ["rate_limited", None, None]
    assert (chats[0].attributes or {})["gen_ai.operation.name"] == "chat"


def test_content_is_recorded_only_when_asked(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    observed_run(tracing=Tracing(provider=provider, content=True))
    flaky = [s for s in exporter.get_finished_spans() if s.name == "execute_tool flaky"]
    results = {(s.attributes or {})["gen_ai.tool.call.result"] for s in flaky}
    assert "second try works" in results
    assert all((s.attributes or {})["gen_ai.tool.call.arguments"] == "{}" for s in flaky)


def test_no_tracer_provider_means_no_tracing() -> None:
    # opentelemetry is imported here, but no global provider is set: nothing to trace with
    assert tracing_for(object(), None, agent_name="a", record_content=False) is None


@pytest.mark.parametrize("is_async", [False, True], ids=["respond", "arespond"])
def test_a_model_sdk_span_nests_under_its_chat_span(
        spans: tuple[TracerProvider, InMemorySpanExporter], is_async: bool) -> None:
    provider, exporter = spans
    sdk = provider.get_tracer("a provider sdk")

    def answer(request: ModelRequest) -> str:
        with sdk.start_as_current_span("POST /chat"):
            return "hi"

    async def answer_async(request: ModelRequest) -> str:
        return answer(request)

    model = FunctionModel(answer_async if is_async else answer)
    with Agent(model, tracing=Tracing(provider=provider)) as agent:
        assert agent.run("hello").text == "hi"
    by_name = {s.name.split(" ")[0]: s for s in exporter.get_finished_spans()}
    http, chat = by_name["POST"], by_name["chat"]
    assert http.parent is not None and http.parent.span_id == chat.context.span_id
    assert chat.parent is not None \
        and chat.parent.span_id == by_name["invoke_agent"].context.span_id


def test_a_refused_call_s_span_has_its_error_code(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans

    @function_tool
    def down() -> str:
        """Its dependency is down."""
        raise ConnectionError("refused")

    model = ScriptedModel([calls(call("down", id="1")), calls(call("down", id="2")), "sorry"])
    guard = Resilience(breaker=Breaker(consecutive_failures=1, open_for=60))
    with Agent(model, [down], limits=Limits(per_tool=guard),
               tracing=Tracing(provider=provider)) as agent:
        agent.run("try twice")
    first, second = sorted((s for s in exporter.get_finished_spans()
                            if s.name == "execute_tool down"), key=lambda s: s.start_time or 0)
    assert (first.attributes or {})["error.type"] == "handler_raised"
    assert "toolvisor.error.code" not in (first.attributes or {})
    assert (second.attributes or {})["error.type"] == "not_found"
    assert (second.attributes or {})["toolvisor.error.code"] == "circuit_open"



def test_a_durable_run_s_resumes_are_spans_of_the_same_conversation(
        spans: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path) -> None:
    provider, exporter = spans
    model = ScriptedModel([calls(call("ask", id="a")), "done"])
    with Agent(model, [ask], store=tmp_path / "runs.sqlite",
               tracing=Tracing(provider=provider)) as agent:
        waiting = agent.run("go")
        assert agent.resume(waiting, "yes").text == "done"
        with pytest.raises(ValueError):
            agent.resume(waiting, "yes")  # answered already: refused, nothing changes
    runs = sorted((s for s in exporter.get_finished_spans() if s.parent is None),
                  key=lambda s: s.start_time or 0)
    assert [((s.attributes or {})["toolvisor.run.resumed"],
             (s.attributes or {})["toolvisor.run.outcome"]) for s in runs] \
        == [(False, "suspended"), (True, "completed"), (True, "answer_refused")]
    assert len({(s.attributes or {})["gen_ai.conversation.id"] for s in runs}) == 1



@pytest.mark.parametrize("isolation", ["thread", "asyncio"])
def test_a_tool_s_own_span_nests_under_its_call(
        spans: tuple[TracerProvider, InMemorySpanExporter], isolation: str) -> None:
    provider, exporter = spans
    inner = provider.get_tracer("the tool's own code")

    def work() -> Ok:
        with inner.start_as_current_span("SELECT"):
            return Ok("found")

    async def work_async(arguments: dict[str, Any]) -> Ok:
        return work()

    lookup = Tool(name="lookup", handler=work_async if isolation == "asyncio"
                  else lambda arguments: work())
    model = ScriptedModel([calls(call("lookup", id="l")), "done"])
    with Agent(model, [lookup], tracing=Tracing(provider=provider)) as agent:
        assert agent.run("look it up").text == "done"
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    select, execute = by_name["SELECT"], by_name["execute_tool lookup"]
    assert select.parent is not None and select.parent.span_id == execute.context.span_id
    assert (execute.attributes or {})["toolvisor.isolation"] == isolation
