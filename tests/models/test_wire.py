"""Each adapter alone, against the local provider server: the request bodies the providers
document, streaming that ends in the very response a plain call gives, and every error of the
SDK mapped to its ``ModelError`` reason."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import openai
import pytest

from tests.support.provider_server import ProviderServer, Reply
from tests.support.provider_wire import (
    KEY,
    WIRES,
    AnthropicWire,
    Call,
    ChatWire,
    ResponsesWire,
    Turn,
    Wire,
)
from toolvisor.contract import (
    AssistantMessage,
    ModelError,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from toolvisor.models import AnthropicModel, OpenAIChatModel, ProviderModel

wires = pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])
HELLO = ModelRequest(messages=(UserMessage(content="hello"),))


def ask(model: ProviderModel, request: ModelRequest = HELLO) -> ModelResponse | ModelError:
    """One call on a fresh event loop; the adapter's connections closed after it."""
    async def call() -> ModelResponse | ModelError:
        try:
            return await model.arespond(request)
        except ModelError as exc:
            return exc
        finally:
            await model.aclose()
    return asyncio.run(call())


@wires
@pytest.mark.parametrize("interleave", [False, True], ids=["in_order", "interleaved"])
def test_a_stream_ends_in_the_response_the_plain_call_gives(
        provider: ProviderServer, wire: Wire, interleave: bool) -> None:
    turn = Turn(text="Two lookups.", calls=(Call("c1", "weather", '{"city": "Paris"}'),
                                            Call("c2", "weather", '{"city":  "Oslo"}')))
    provider.script(wire.reply(turn), wire.stream(turn, interleave=interleave))
    plain = ask(wire.model(provider.url))
    streamed = ask(wire.model(provider.url, stream=True))
    assert isinstance(plain, ModelResponse)
    assert streamed == plain
    assert plain.finish_reason == "tool_calls" and plain.text == "Two lookups."
    assert plain.usage == Usage(input_tokens=20, output_tokens=8, cached_tokens=4)
    assert (plain.model, plain.response_id) == ("model-2026", "answer-1")
    assert [c.id for c in plain.tool_calls] == ["c1", "c2"]
    assert plain.tool_calls[1].arguments == {"city": "Oslo"}
    assert provider.requests[1].body["stream"] is True


@wires
def test_a_truncated_answer_says_length(provider: ProviderServer, wire: Wire) -> None:
    provider.script(wire.reply(Turn(text="Once upon a", finish="length")))
    response = ask(wire.model(provider.url))
    assert isinstance(response, ModelResponse) and response.finish_reason == "length"


TRANSCRIPT = ModelRequest(
    messages=(SystemMessage(content="Be brief."), UserMessage(content="Weather in Paris, Oslo?"),
              AssistantMessage(content="Checking.", tool_calls=(
                  ToolCall.from_text("c1", "weather", '{"city":"Paris"}'),
                  ToolCall(id="c2", name="weather", arguments={"city": "Oslo"}))),
              ToolResultMessage(tool_call_id="c1", name="weather", content="sunny"),
              ToolResultMessage(tool_call_id="c2", name="weather", content='{"error": 1}',
                                is_error=True)),
    tools=(ToolSpec(name="weather", description="The weather in a city.",
                    input_schema={"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}),))
SCHEMA = TRANSCRIPT.tools[0].input_schema


def sent(provider: ProviderServer, wire: Wire, **settings: Any) -> Any:
    provider.script(wire.reply(Turn(text="ok")))
    assert isinstance(ask(wire.model(provider.url, **settings), TRANSCRIPT), ModelResponse)
    return provider.requests[0]


def test_chat_completions_requests_are_what_openai_documents(provider: ProviderServer) -> None:
    request = sent(provider, ChatWire(), temperature=0.2)
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-test", "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris, Oslo?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
                {"id": "c2", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "c2", "content": '{"error": 1}'}],
        "tools": [{"type": "function", "function": {
            "name": "weather", "description": "The weather in a city.", "parameters": SCHEMA}}]}


def test_responses_requests_are_what_openai_documents(provider: ProviderServer) -> None:
    request = sent(provider, ResponsesWire(), max_output_tokens=500)
    assert request.path == "/v1/responses"
    assert request.body == {
        "model": "gpt-test", "max_output_tokens": 500,
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris, Oslo?"},
            {"role": "assistant", "content": "Checking."},
            {"type": "function_call", "call_id": "c1", "name": "weather",
             "arguments": '{"city":"Paris"}'},
            {"type": "function_call", "call_id": "c2", "name": "weather",
             "arguments": '{"city": "Oslo"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": '{"error": 1}'}],
        "tools": [{"type": "function", "name": "weather", "description": "The weather in a city.",
                   "parameters": SCHEMA, "strict": False}]}


def test_messages_requests_group_one_turns_results_as_anthropic_documents(
        provider: ProviderServer) -> None:
    request = sent(provider, AnthropicWire())
    assert request.path == "/v1/messages"
    assert request.body == {
        "model": "claude-test", "max_tokens": 4096, "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris, Oslo?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "c2", "content": '{"error": 1}',
                 "is_error": True}]}],
        "tools": [{"name": "weather", "description": "The weather in a city.",
                   "input_schema": SCHEMA}]}


def test_anthropic_settings_replace_the_default_max_tokens(provider: ProviderServer) -> None:
    assert sent(provider, AnthropicWire(), max_tokens=99).body["max_tokens"] == 99


@wires
def test_the_sdks_timeout_is_timeout(provider: ProviderServer, wire: Wire) -> None:
    hold = threading.Event()
    provider.script(Reply(body={}, hold=hold))
    model = wire.model(provider.url, client=wire.client(provider.url, timeout=0.05))
    try:
        error = ask(model)
    finally:
        hold.set()
    assert isinstance(error, ModelError) and error.reason == "timeout"


@wires
def test_a_connection_refused_is_unavailable(provider: ProviderServer, wire: Wire) -> None:
    error = ask(wire.model("http://127.0.0.1:9"))  # the discard port: nothing listens
    assert isinstance(error, ModelError) and error.reason == "unavailable"


@wires
def test_an_answer_that_cannot_be_read_is_invalid_response(provider: ProviderServer,
                                                            wire: Wire) -> None:
    provider.script(Reply(body={"choices": [{"message": {"tool_calls": [{"id": 1}]}}],
                                "output": [{"type": "function_call"}],
                                "content": [{"type": "tool_use"}]}))
    error = ask(wire.model(provider.url))
    assert isinstance(error, ModelError) and error.reason == "invalid_response"


def test_a_completion_without_choices_is_invalid_response(provider: ProviderServer) -> None:
    provider.script(Reply(body={"id": "x", "object": "chat.completion", "choices": []}))
    error = ask(ChatWire().model(provider.url))
    assert isinstance(error, ModelError) and error.reason == "invalid_response"
    assert "no choices" in error.message


@pytest.mark.parametrize(("kind", "reason"), [
    ("overloaded_error", "unavailable"), ("rate_limit_error", "rate_limited"),
    ("invalid_request_error", "rejected")])
def test_an_error_event_inside_an_anthropic_stream_is_read_by_its_type(
        provider: ProviderServer, kind: str, reason: str) -> None:
    wire = AnthropicWire()
    events = wire.stream(Turn(text="Hi there")).events
    assert events is not None
    provider.script(Reply(events=[*events[:3], ("error", {
        "type": "error", "error": {"type": kind, "message": "Overloaded"}})]))
    error = ask(wire.model(provider.url, stream=True))
    assert isinstance(error, ModelError) and error.reason == reason


@pytest.mark.parametrize(("code", "reason"), [
    ("server_error", "unavailable"), ("rate_limit_exceeded", "rate_limited"),
    ("invalid_prompt", "rejected")])
def test_a_failed_response_or_error_event_is_read_by_its_code(
        provider: ProviderServer, code: str, reason: str) -> None:
    wire = ResponsesWire()
    failed = {**wire.reply(Turn(text="x")).body, "status": "failed", "output": [],
              "error": {"code": code, "message": "It failed."}}
    provider.script(Reply(body=failed), Reply(events=[
        ("error", {"type": "error", "code": code, "message": "It failed.", "param": None,
                   "sequence_number": 1})]))
    plain = ask(wire.model(provider.url))
    streamed = ask(wire.model(provider.url, stream=True))
    assert isinstance(plain, ModelError) and isinstance(streamed, ModelError)
    assert (plain.reason, streamed.reason) == (reason, reason)
    assert "It failed." in plain.message


def test_a_responses_stream_that_ends_without_its_last_event_is_unavailable(
        provider: ProviderServer) -> None:
    wire = ResponsesWire()
    events = wire.stream(Turn(text="Hello")).events
    assert events is not None
    provider.script(Reply(events=events[:-1]))  # ends cleanly, but before response.completed
    error = ask(wire.model(provider.url, stream=True))
    assert isinstance(error, ModelError) and error.reason == "unavailable"


def test_a_given_client_is_used_with_its_retries_off(provider: ProviderServer) -> None:
    wire = ChatWire()
    provider.script(wire.error(500, "boom"))
    error = ask(wire.model("", client=wire.client(provider.url, max_retries=5)))
    assert isinstance(error, ModelError) and error.reason == "unavailable"
    assert len(provider.requests) == 1
    assert provider.requests[0].headers["x-stainless-retry-count"] == "0"


def test_a_closed_adapter_opens_a_new_client_when_asked_again(provider: ProviderServer) -> None:
    wire = ChatWire()
    model = wire.model(provider.url)
    provider.script(wire.reply(Turn(text="one")), wire.reply(Turn(text="two")))
    first = ask(model)
    second = ask(model)  # ask() closed it after the first call
    assert isinstance(first, ModelResponse) and isinstance(second, ModelResponse)
    assert (first.text, second.text) == ("one", "two")


@pytest.mark.parametrize("make", [
    lambda: OpenAIChatModel("m", api_key=KEY, messages=[]),
    lambda: AnthropicModel("m", api_key=KEY, system="x"),
    lambda: OpenAIChatModel("m", api_key=KEY, client=openai.AsyncOpenAI(api_key=KEY)),
    lambda: OpenAIChatModel("", api_key=KEY),
])
def test_settings_the_adapter_owns_are_refused(make: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        make()
