"""Direct completions beyond one thread: asked from a worker process or a Ray task over the
context link, spanned under the tool's span, retried after what a real provider's 429 asked
(the local OpenAI-compatible server), and journaled so that a host SIGKILLed after a
completion does not pay for it again when the run resumes in a new process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import completion_handlers as ch
from tests.support.provider_server import ProviderServer
from tests.support.provider_wire import ChatWire, Turn
from toolvisor import Agent, CallContext, Tool, Tracing, function_tool
from toolvisor.contract import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from toolvisor.durable import SqliteRunStore
from toolvisor.isolation import prepare_process_isolation
from toolvisor.machine import ModelRetryPolicy, RetryAfter
from toolvisor.testing import ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parents[2]
RANK_PROMPT = "Rank: otp, cooking, actors"


@pytest.fixture(scope="module", autouse=True)
def _process_helpers() -> None:
    prepare_process_isolation()


@pytest.fixture(params=["process", "ray"])
def isolation(request: pytest.FixtureRequest, ray_cluster: ModuleType) -> str:
    return str(request.param)


def ranking_model(tool: str, arguments: dict[str, Any] | None = None) -> ScriptedModel:
    return ScriptedModel({
        "go": [calls(call(tool, arguments or {})), "done"],
        RANK_PROMPT: [ModelResponse(text="otp, actors, cooking",
                                    usage=Usage(input_tokens=20, output_tokens=5))],
    })


def tool_result(outcome: Any) -> Any:
    results = [m.content for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1, outcome.messages
    return json.loads(results[0])


def test_a_worker_asks_the_runs_model_over_the_link_and_its_usage_is_the_runs(
        isolation: str) -> None:
    tool = Tool("rank", handler=ch.ranks, isolation=isolation)  # type: ignore[arg-type]
    model = ranking_model("rank", {"prompt": RANK_PROMPT})
    with model, Agent(model, [tool]) as agent:
        outcome = agent.run("go")
    result = tool_result(outcome)
    assert result["pid"] != os.getpid()
    assert (result["text"], result["tokens"]) == ("otp, actors, cooking", 20)
    assert outcome.usage == Usage(input_tokens=20, output_tokens=5)


def test_a_refused_completion_crosses_back_to_the_worker_with_its_code(isolation: str) -> None:
    tool = Tool("ask", handler=ch.names_a_missing_model, isolation=isolation)  # type: ignore[arg-type]
    model = ScriptedModel([calls(call("ask")), "done"])
    with model, Agent(model, [tool]) as agent:
        result = tool_result(agent.run("go"))
    assert result["pid"] != os.getpid()
    assert result["code"] == "completion_unknown_model"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@function_tool
def rank(ctx: CallContext) -> str:
    """Ranks with one completion of the run's model."""
    return ctx.direct_completions.complete(RANK_PROMPT, source="rank").text or ""


def test_each_attempt_of_a_completion_is_a_chat_span_under_the_tools_span(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel({
        "go": [calls(call("rank")), "done"],
        RANK_PROMPT: [ModelError("unavailable", "503"),
                      ModelResponse(text="otp", usage=Usage(input_tokens=7, output_tokens=2))],
    })
    with model, Agent(model, [rank], tracing=Tracing(provider=provider),
                      on_model_error=ModelRetryPolicy(base_delay=0.0, jitter=0.0)) as agent:
        agent.run("go")
    finished = exporter.get_finished_spans()
    by_name: dict[str, list[Any]] = {}
    for span in finished:
        by_name.setdefault(span.name.split(" ")[0], []).append(span)
    (tool_span,) = by_name["execute_tool"]
    (run_span,) = by_name["invoke_agent"]
    completions = [s for s in by_name["chat"] if s.parent.span_id == tool_span.context.span_id]
    runs_own = [s for s in by_name["chat"] if s.parent.span_id == run_span.context.span_id]
    assert len(runs_own) == 2  # the run's two model calls, under the run's span
    assert [s.attributes["toolvisor.attempt"] for s in completions] == [1, 2]
    assert {s.attributes["toolvisor.completion.source"] for s in completions} == {"rank"}
    assert completions[0].attributes["error.type"] == "unavailable"
    assert completions[1].attributes["gen_ai.usage.input_tokens"] == 7
    assert all(s.context.trace_id == run_span.context.trace_id for s in completions)


def test_a_completion_finished_before_a_sigkill_is_not_paid_again_on_resume(
        tmp_path: Path) -> None:
    store_path = tmp_path / "runs.sqlite"
    host = [sys.executable, "-m", "tests.programs.completion_host"]
    first = subprocess.Popen([*host, "first", str(store_path), str(tmp_path)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None
        assert json.loads(first.stdout.readline()) == {"blocked": "otp, actors, cooking"}
        first.send_signal(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        if first.stdout is not None:
            first.stdout.close()
    assert (tmp_path / "paid.log").read_text().splitlines() == ["rank"]
    with SqliteRunStore(store_path) as store:
        (run,) = store.runs()

    done = subprocess.run([*host, "resume", str(store_path), str(tmp_path), run.run_id],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    outcome = json.loads(done.stdout.splitlines()[-1])["outcome"]
    assert outcome["tool"] == ["otp, actors, cooking"]  # read back from the journal
    assert (tmp_path / "paid.log").read_text().splitlines() == ["rank"]  # paid once
    assert outcome["usage"]["input_tokens"] == 20  # and counted once, in the run's usage


def asks_the_ranker(seen: list[Any]) -> Tool:
    @function_tool
    def rank_remotely(ctx: CallContext) -> str:
        """Ranks with the agent's "ranker" model, over HTTP."""
        request = ModelRequest(messages=(UserMessage(content=RANK_PROMPT),), model="ranker")
        try:
            return ctx.direct_completions.complete(request).text or ""
        except ModelError as exc:
            seen.append(exc)
            return f"gave up: {exc.reason}"
    return rank_remotely


def test_a_completion_rate_limited_by_a_real_provider_retries_after_what_it_asked(
        provider: ProviderServer) -> None:
    wire = ChatWire()
    provider.script(wire.error(429, "slow down", {"retry-after": "0"}),
                    wire.reply(Turn(text="otp, actors, cooking")))
    decided: list[ModelError] = []

    def policy(error: ModelError) -> RetryAfter:
        decided.append(error)
        return RetryAfter(error.retry_after or 0.0)

    model = ScriptedModel([calls(call("rank_remotely")), "done"])
    with model, Agent(model, [asks_the_ranker([])], on_model_error=policy,
                      models={"ranker": wire.model(provider.url)}) as agent:
        outcome = agent.run("go")
    assert [m.content for m in outcome.messages if isinstance(m, ToolResultMessage)] \
        == ["otp, actors, cooking"]
    assert [(e.reason, e.status, e.retry_after, e.attempt) for e in decided] \
        == [("rate_limited", 429, 0.0, 1)]
    assert len(provider.requests) == 2
    assert outcome.usage == Usage(input_tokens=20, output_tokens=8, cached_tokens=4)


def test_a_retry_after_past_the_policys_cap_gives_up_rather_than_hammer(
        provider: ProviderServer) -> None:
    wire = ChatWire()
    provider.script(wire.error(429, "slow down", {"retry-after": "120"}))
    seen: list[ModelError] = []
    model = ScriptedModel([calls(call("rank_remotely")), "done"])
    with model, Agent(model, [asks_the_ranker(seen)],
                      on_model_error=ModelRetryPolicy(max_retry_after=60.0),
                      models={"ranker": wire.model(provider.url)}) as agent:
        agent.run("go")
    assert [(e.reason, e.retry_after) for e in seen] == [("rate_limited", 120.0)]
    assert len(provider.requests) == 1
