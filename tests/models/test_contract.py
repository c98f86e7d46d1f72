"""The same scenarios over every provider adapter: its real SDK, real HTTP, the provider's real
wire JSON and SSE from a local server (no network, no key).

Each scenario runs a supervised ``Agent`` against the adapter and checks the outcome and the
request bodies the server recorded: the tools offered, the tool results sent back, and the
model's own arguments echoed byte for byte.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from tests.support.provider_server import ProviderServer
from tests.support.provider_wire import KEY, WIRES, Call, Turn, Wire
from toolvisor import Agent, Completed, Failed, InvalidArguments, ModelError, Ok, Tracing, tool
from toolvisor.machine import CallAttempt, ContinueRun, ModelRetryPolicy, RetryAfter


class City(BaseModel):
    city: str


def weather_tool(seen: list[str]) -> Any:
    @tool
    def weather(arguments: City) -> Ok:
        """The weather in a city."""
        seen.append(arguments.city)
        return Ok(f"sunny in {arguments.city}")
    return weather


PARIS = Call("call_a", "weather", '{"city": "Paris"}')
OSLO = Call("call_b", "weather", '{ "city":"Oslo" }')  # spacing the echo must keep
FINAL = Turn(text="Sunny in Paris and Oslo.", id="answer-2")

wires = pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])
streams = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


def answer(wire: Wire, turn: Turn, stream: bool) -> Any:
    return wire.stream(turn) if stream else wire.reply(turn)


def run(provider: ProviderServer, wire: Wire, *, stream: bool = False, seen: list[str],
        **settings: Any) -> Any:
    with Agent(wire.model(provider.url, stream=stream), [weather_tool(seen)],
               **settings) as agent:
        outcome = agent.run("What is the weather in Paris and Oslo?")
    assert provider.unused == 0
    return outcome


@wires
@streams
def test_two_parallel_calls_then_a_final_answer(provider: ProviderServer, wire: Wire,
                                                stream: bool) -> None:
    turn = Turn(text="Let me check.", calls=(PARIS, OSLO))
    provider.script(answer(wire, turn, stream), answer(wire, FINAL, stream))
    seen: list[str] = []
    outcome = run(provider, wire, stream=stream, seen=seen)

    assert isinstance(outcome, Completed)
    assert outcome.text == "Sunny in Paris and Oslo."
    assert sorted(seen) == ["Oslo", "Paris"]
    assert outcome.usage.model_dump() == {"input_tokens": 40, "output_tokens": 16,
                                          "cached_tokens": 8}
    first, second = (r.body for r in provider.requests)
    assert wire.offered(first) == wire.offered(second) == ["weather"]
    echoed = wire.echoed(second)
    if wire.sends_objects:
        assert echoed == {"call_a": {"city": "Paris"}, "call_b": {"city": "Oslo"}}
    else:
        assert echoed == {"call_a": PARIS.arguments, "call_b": OSLO.arguments}
    assert wire.results(second) == {"call_a": ("sunny in Paris", False),
                                    "call_b": ("sunny in Oslo", False)}
    assert all(r.headers.get("x-stainless-retry-count") == "0" for r in provider.requests)
    assert all(KEY in (r.headers.get("authorization", "") + r.headers.get("x-api-key", ""))
               for r in provider.requests)


@wires
@pytest.mark.parametrize(("arguments", "says"), [
    ('{"city": "Par', "the arguments are not valid JSON"),
    ('["Paris"]', "the arguments must be a JSON object, got an array"),
], ids=["malformed", "not_an_object"])
def test_arguments_that_are_no_object_fail_that_call_only(
        provider: ProviderServer, wire: Wire, arguments: str, says: str) -> None:
    bad = Call("call_b", "weather", arguments)
    stream = wire.sends_objects  # Anthropic's JSON body always carries an object: stream it
    provider.script(answer(wire, Turn(calls=(PARIS, bad)), stream),
                    answer(wire, FINAL, stream))
    decided: list[tuple[CallAttempt, Any]] = []

    def policy(failed: CallAttempt, error: Any) -> ContinueRun:
        decided.append((failed, error))
        return ContinueRun()

    seen: list[str] = []
    outcome = run(provider, wire, stream=stream, seen=seen, on_tool_error=policy)

    assert isinstance(outcome, Completed)
    assert seen == ["Paris"]  # the sibling ran
    ((failed, error),) = decided
    assert failed.id == "call_b" and isinstance(error, InvalidArguments)
    assert error.violations[0].path == "$" and says in error.violations[0].message
    results = wire.results(provider.requests[1].body)
    assert results["call_a"] == ("sunny in Paris", False)
    text, _ = results["call_b"]
    assert "invalid_arguments" in text and says in text
    echoed = wire.echoed(provider.requests[1].body)["call_b"]
    assert echoed == ({} if wire.sends_objects else arguments)  # byte for byte
    asked = next(m for m in outcome.messages if m.role == "assistant")
    assert asked.tool_calls[1].raw_arguments == arguments  # type: ignore[union-attr]


@wires
@pytest.mark.parametrize(("headers", "wait"), [
    ({"retry-after": "7"}, 7.0), ({"retry-after-ms": "250", "retry-after": "1"}, 0.25)])
def test_a_429_is_rate_limited_with_the_wait_the_provider_asked_for(
        provider: ProviderServer, wire: Wire, headers: dict[str, str], wait: float) -> None:
    provider.script(wire.error(429, "Rate limit reached", headers), wire.reply(FINAL))
    errors: list[ModelError] = []

    def policy(error: ModelError) -> RetryAfter:
        errors.append(error)
        return RetryAfter(0)

    outcome = run(provider, wire, seen=[], on_model_error=policy)
    assert isinstance(outcome, Completed)
    (error,) = errors
    assert (error.reason, error.status, error.retry_after) == ("rate_limited", 429, wait)
    assert "Rate limit reached" in error.message
    assert len(provider.requests) == 2  # the SDK itself never retried


@wires
@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
def test_server_errors_and_overload_are_unavailable_and_retried(
        provider: ProviderServer, wire: Wire, status: int) -> None:
    provider.script(wire.error(status, "The server had an error"), wire.reply(FINAL))
    outcome = run(provider, wire, seen=[], on_model_error=ModelRetryPolicy(base_delay=0))
    assert isinstance(outcome, Completed)
    assert len(provider.requests) == 2


@wires
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_refused_request_fails_the_run_at_once_with_the_providers_message(
        provider: ProviderServer, wire: Wire, status: int) -> None:
    provider.script(wire.error(status, "Incorrect API key provided"))
    outcome = run(provider, wire, seen=[])  # the default policy retries what may pass
    assert isinstance(outcome, Failed) and outcome.model_error is not None
    assert outcome.model_error.reason == "rejected"
    assert outcome.model_error.status == status
    assert "Incorrect API key provided" in outcome.model_error.message
    assert outcome.model_error.attempts == 1 and len(provider.requests) == 1


@wires
@streams
def test_a_truncated_answer_never_runs_its_calls(provider: ProviderServer, wire: Wire,
                                                 stream: bool) -> None:
    half = Call("call_b", "weather", '{"city": "Os')
    calls = (PARIS, half) if not wire.sends_objects or stream else (PARIS,)
    provider.script(answer(wire, Turn(calls=calls, finish="length"), stream),
                    answer(wire, FINAL, stream))
    seen: list[str] = []
    outcome = run(provider, wire, stream=stream, seen=seen)

    assert isinstance(outcome, Completed)
    assert seen == []
    results = wire.results(provider.requests[1].body)
    assert set(results) == {c.id for c in calls}
    assert all("truncated" in text and "token limit" in text for text, _ in results.values())


@wires
def test_a_broken_stream_is_unavailable_and_its_retry_sends_no_duplicate_call(
        provider: ProviderServer, wire: Wire) -> None:
    turn = Turn(text="Checking both.", calls=(PARIS, OSLO))
    full = wire.stream(turn)
    assert full.events is not None
    provider.script(wire.stream(turn, cut_after=len(full.events) - 3), full,
                    wire.stream(FINAL))
    errors: list[ModelError] = []
    deltas: list[tuple[int, str]] = []

    def policy(error: ModelError) -> RetryAfter:
        errors.append(error)
        return RetryAfter(0)

    def progress(run_id: str, event: str, data: dict[str, Any]) -> None:
        if event == "model_text_delta":
            deltas.append((data["attempt"], data["text"]))

    seen: list[str] = []
    outcome = run(provider, wire, stream=True, seen=seen, on_model_error=policy,
                  tracing=Tracing(on_progress=progress))

    assert isinstance(outcome, Completed)
    assert [e.reason for e in errors] == ["unavailable"]
    assert sorted(seen) == ["Oslo", "Paris"]  # each call ran once
    assistant = [m for m in outcome.messages if m.role == "assistant"]
    assert [len(m.tool_calls) for m in assistant] == [2, 0]  # type: ignore[union-attr]
    last = provider.requests[-1].body
    assert sorted(wire.echoed(last)) == ["call_a", "call_b"]
    assert "".join(t for a, t in deltas if a == 2) == "Checking both."


@wires
def test_text_deltas_are_progress_events_of_their_turn(provider: ProviderServer,
                                                        wire: Wire) -> None:
    provider.script(wire.stream(Turn(text="Looking.", calls=(PARIS,))), wire.stream(FINAL))
    deltas: list[dict[str, Any]] = []

    def progress(run_id: str, event: str, data: dict[str, Any]) -> None:
        if event == "model_text_delta":
            deltas.append(data)

    run(provider, wire, stream=True, seen=[], tracing=Tracing(on_progress=progress))
    assert len(deltas) >= 4
    assert "".join(d["text"] for d in deltas if d["turn"] == 1) == "Looking."
    assert "".join(d["text"] for d in deltas if d["turn"] == 2) == FINAL.text
    assert {d["attempt"] for d in deltas} == {1}
