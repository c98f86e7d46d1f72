"""The same scenarios over every provider adapter: its real SDK, real HTTP, the provider's real
wire JSON from a local server (no network, no key).

Each scenario runs a supervised ``Agent`` against the adapter and checks the outcome and the
request bodies the server recorded: the tools offered, the tool results sent back, and the
model's own arguments echoed byte for byte.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from tests._provider_server import ProviderServer
from tests._provider_wire import KEY, WIRES, Call, Turn, Wire
from toolvisor import Agent, Completed, Failed, InvalidArguments, ModelError, Ok, tool
from toolvisor.machine import Continue, FailedCall, ModelRetryPolicy, RetryAfter


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


def run(provider: ProviderServer, wire: Wire, *, seen: list[str], **settings: Any) -> Any:
    with Agent(wire.model(provider.url), [weather_tool(seen)], **settings) as agent:
        outcome = agent.run("What is the weather in Paris and Oslo?")
    assert provider.unused == 0
    return outcome


@wires
def test_two_parallel_calls_then_a_final_answer(provider: ProviderServer, wire: Wire) -> None:
    turn = Turn(text="Let me check.", calls=(PARIS, OSLO))
    provider.script(wire.reply(turn), wire.reply(FINAL))
    seen: list[str] = []
    outcome = run(provider, wire, seen=seen)

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


MALFORMED = ('{"city": "Par', "the arguments are not valid JSON")
NOT_AN_OBJECT = ('["Paris"]', "the arguments must be a JSON object, got an array")


@pytest.mark.parametrize(("wire", "arguments", "says"), [
    (w, *case) for w in WIRES for case in (MALFORMED, NOT_AN_OBJECT)
    if not (w.sends_objects and case is MALFORMED)  # Anthropic's JSON body holds objects only
], ids=lambda v: v.name if isinstance(v, Wire) else None)
def test_arguments_that_are_no_object_fail_that_call_only(
        provider: ProviderServer, wire: Wire, arguments: str, says: str) -> None:
    bad = Call("call_b", "weather", arguments)
    provider.script(wire.reply(Turn(calls=(PARIS, bad))), wire.reply(FINAL))
    decided: list[tuple[FailedCall, Any]] = []

    def policy(failed: FailedCall, error: Any) -> Continue:
        decided.append((failed, error))
        return Continue()

    seen: list[str] = []
    outcome = run(provider, wire, seen=seen, on_tool_error=policy)

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
def test_a_truncated_answer_never_runs_its_calls(provider: ProviderServer, wire: Wire) -> None:
    half = Call("call_b", "weather", '{"city": "Os')
    calls = (PARIS,) if wire.sends_objects else (PARIS, half)
    provider.script(wire.reply(Turn(calls=calls, finish="length")), wire.reply(FINAL))
    seen: list[str] = []
    outcome = run(provider, wire, seen=seen)

    assert isinstance(outcome, Completed)
    assert seen == []
    results = wire.results(provider.requests[1].body)
    assert set(results) == {c.id for c in calls}
    assert all("truncated" in text and "token limit" in text for text, _ in results.values())
