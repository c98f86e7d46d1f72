"""``SupervisedCalls``, the core every framework adapter shares: one call under the runner,
behind its gate, in its span, recorded and replayed by ``tool_call_id`` with a store."""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.adapter_tools import tools
from toolvisor import Bulkhead, Err, Ok, RateLimit, Resilience, ToolError, function_tool
from toolvisor.adapters import SupervisedCalls
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import capture_events


def test_a_plain_function_becomes_a_tool_and_runs() -> None:
    def double(n: int) -> int:
        """Twice ``n``."""
        return 2 * n

    with SupervisedCalls([double]) as calls:
        done = calls.run("double", {"n": 4}, "c1")
        assert (done.result, done.text, done.replayed) == (Ok(8), "8", False)
        unknown = calls.run("triple", {}, "c2").result
        assert isinstance(unknown, Err) and unknown.reason.reason == "not_found"


def test_a_finished_call_is_replayed_by_its_id_and_not_run_again(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLVISOR_TEST_COUNT", str(counter))
        with SqliteRunStore(tmp_path / "s.db") as store:
            with SupervisedCalls(tools, store=store, run_id="thread-1") as calls:
                assert calls.run("add", {"a": 1, "b": 2}, "c1").result == Ok(3)
            with SupervisedCalls(tools, store=store, run_id="thread-1") as again, \
                    capture_events() as events:
                replayed = again.run("add", {"a": 1, "b": 2}, "c1")
                failed = again.run("crash", {}, "c2")
                assert again.run("crash", {}, "c2").replayed
    assert (replayed.result, replayed.replayed) == (Ok(3), True)
    assert counter.read_text() == "add\n"
    assert isinstance(failed.result, Err) and isinstance(failed.result.reason, ToolError)
    assert failed.result.reason.reason == "handler_raised"
    assert [e["tool_call_id"] for e in events if e["event"] == "call_replayed"] == ["c1", "c2"]


def test_a_store_comes_with_a_run_id(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "s.db") as store, \
            pytest.raises(ValueError, match="give store and run_id together"):
        SupervisedCalls(tools, store=store)


def test_a_full_bulkhead_refuses_the_call_without_running_it() -> None:
    entered, release = threading.Event(), threading.Event()

    @function_tool
    def slow() -> str:
        """Waits for the test."""
        entered.set()
        release.wait(10)
        return "done"

    guard = Resilience(bulkhead=Bulkhead(max_concurrent=1, max_queue=0))
    with SupervisedCalls([slow], resilience=guard) as calls:
        async def both() -> tuple[object, object]:
            first = asyncio.ensure_future(calls.arun("slow", {}, "c1"))
            await asyncio.to_thread(entered.wait, 10)
            second = await calls.arun("slow", {}, "c2")
            release.set()
            return (await first).result, second.result

        first, second = asyncio.run(both())
    assert first == Ok("done")
    assert isinstance(second, Err) and second.reason.code == "bulkhead_full"


def test_each_call_is_a_span_under_the_current_one() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("framework")
    with SupervisedCalls(tools, tracer_provider=provider) as calls, \
            tracer.start_as_current_span("framework tool"):
        calls.run("crash", {}, "c1")
    provider.shutdown()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    call = spans["execute_tool crash"]
    assert call.parent is not None
    assert call.parent.span_id == spans["framework tool"].context.span_id
    assert call.attributes is not None
    assert call.attributes["toolvisor.call.outcome"] == "handler_raised"
    assert call.attributes["gen_ai.tool.call.id"] == "c1"


def test_a_rate_limited_call_waits_for_its_token_then_runs() -> None:
    """The second call's token is due 50 ms later: the gate's timer wakes it, and it runs."""
    limit = Resilience(rate_limit=RateLimit(calls=1, per=0.05, max_wait=10))
    with SupervisedCalls(tools, resilience=limit) as calls:
        async def both() -> list[object]:
            done = await asyncio.gather(calls.arun("add", {"a": 1, "b": 1}, "c1"),
                                        calls.arun("add", {"a": 2, "b": 2}, "c2"))
            return [d.result for d in done]

        assert asyncio.run(both()) == [Ok(2), Ok(4)]
        assert calls.stats.calls_started == 2


def test_a_rate_limit_that_cannot_wait_refuses_the_call() -> None:
    limit = Resilience(rate_limit=RateLimit(calls=1, per=60, max_wait=0))
    with SupervisedCalls(tools, resilience=limit) as calls:
        assert calls.run("add", {"a": 1, "b": 1}, "c1").result == Ok(2)
        refused = calls.run("add", {"a": 1, "b": 1}, "c2").result
    assert isinstance(refused, Err) and refused.reason.code == "rate_limited"


def test_arguments_as_text_that_is_no_object_are_refused_before_running() -> None:
    with SupervisedCalls(tools) as calls:
        assert calls.run("add", '{"a": 1, "b": 2}', "c1").result == Ok(3)
        refused = calls.run("add", "[1, 2]", "c2")
    assert '"reason":"invalid_arguments"' in refused.text


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("langgraph", "langgraph", "langgraph"),
    ("openai_agents", "agents", "openai-agents")])
def test_an_adapter_without_its_framework_names_its_extra(
        module: str, framework: str, extra: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [framework, *(n for n in sys.modules if n.startswith(f"{framework}."))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, f"toolvisor.adapters.{module}", raising=False)
    hint = f"pip install '.[{extra}]' in toolvisor's clone"
    with pytest.raises(ImportError, match=re.escape(hint)):
        importlib.import_module(f"toolvisor.adapters.{module}")
