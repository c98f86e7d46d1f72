"""Each provider's real wire format, for the scenarios the adapter tests script.

A scenario is a list of model turns (text, tool calls with the arguments text the model wrote,
why it stopped, usage); each ``Wire`` spells a turn as its provider's JSON body and as its
server-sent event stream, spells error bodies, and reads back what an adapter sent (the tools
offered, the arguments it echoed, the tool results). The shapes follow the providers'
references for Chat Completions, the Responses API and the Messages API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import anthropic
import openai

from tests.support.provider_server import Reply
from toolvisor.models import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel, ProviderModel

KEY = "test-key"
Finish = Literal["stop", "tool_calls", "length"]


@dataclass(frozen=True)
class Call:
    """A tool call as the model wrote it: ``arguments`` is its text, byte for byte."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Turn:
    """One model answer; ``finish`` defaults to ``tool_calls`` when it has calls."""

    text: str | None = None
    calls: tuple[Call, ...] = ()
    finish: Finish | None = None
    usage: tuple[int, int, int] = (20, 8, 4)  # input (cached included), output, cached
    model: str = "model-2026"
    id: str = "answer-1"

    @property
    def why(self) -> Finish:
        return self.finish or ("tool_calls" if self.calls else "stop")


def halves(text: str) -> list[str]:
    """A text in two deltas (both non-empty when it has two characters)."""
    cut = max(1, len(text) // 2)
    return [text[:cut], text[cut:]] if len(text) > 1 else [text]


def interleaved(pieces: list[list[Any]], interleave: bool) -> list[Any]:
    """Every call's deltas, one call after another or round-robin across calls."""
    if not interleave:
        return [piece for call in pieces for piece in call]
    rounds = max((len(p) for p in pieces), default=0)
    return [p[i] for i in range(rounds) for p in pieces if i < len(p)]


@dataclass
class Wire:
    """A provider's wire format (subclasses), and how its adapter is built."""

    name: str = ""
    sends_objects: bool = False  # tool arguments arrive as objects in a JSON body (Anthropic)
    settings: dict[str, Any] = field(default_factory=dict)

    def model(self, url: str, *, stream: bool = False, client: Any = None,
              **settings: Any) -> ProviderModel:
        """The adapter, on the server at ``url`` (or through ``client``, an SDK client)."""
        raise NotImplementedError

    def client(self, url: str, **options: Any) -> Any:
        """The provider's own SDK client for the server at ``url``."""
        raise NotImplementedError

    def reply(self, turn: Turn) -> Reply:
        raise NotImplementedError

    def stream(self, turn: Turn, *, interleave: bool = False,
               cut_after: int | None = None) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        raise NotImplementedError

    def offered(self, body: Any) -> list[str]:
        raise NotImplementedError

    def echoed(self, body: Any) -> dict[str, Any]:
        """Call id -> the arguments the adapter sent back for it."""
        raise NotImplementedError

    def results(self, body: Any) -> dict[str, tuple[str, bool]]:
        """Call id -> (the result text sent, whether it was marked an error)."""
        raise NotImplementedError


_OPENAI_ERRORS = {400: "invalid_request_error", 401: "invalid_request_error",
                  403: "invalid_request_error", 404: "invalid_request_error",
                  422: "invalid_request_error", 429: "requests"}


def _openai_error(status: int, message: str, headers: dict[str, str] | None) -> Reply:
    kind = _OPENAI_ERRORS.get(status, "server_error")
    code = "rate_limit_exceeded" if status == 429 else "invalid_api_key" if status == 401 \
        else None
    return Reply(status=status, headers=headers or {}, body={
        "error": {"message": message, "type": kind, "param": None, "code": code}})


class ChatWire(Wire):
    """OpenAI's Chat Completions: ``/v1/chat/completions``."""

    def __init__(self) -> None:
        super().__init__(name="openai-chat")

    def model(self, url: str, *, stream: bool = False, client: Any = None,
              **settings: Any) -> ProviderModel:
        where = {"client": client} if client else {"base_url": f"{url}/v1", "api_key": KEY}
        return OpenAIChatModel("gpt-test", stream=stream, **where, **settings)

    def client(self, url: str, **options: Any) -> Any:
        return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, **options)

    def _usage(self, turn: Turn) -> dict[str, Any]:
        given, made, cached = turn.usage
        return {"prompt_tokens": given, "completion_tokens": made, "total_tokens": given + made,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}

    def reply(self, turn: Turn) -> Reply:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None,
                                   "annotations": []}
        if turn.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls]
        return Reply(body={
            "id": turn.id, "object": "chat.completion", "created": 1767225600,
            "model": turn.model, "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": turn.why}],
            "usage": self._usage(turn), "service_tier": "default"})

    def stream(self, turn: Turn, *, interleave: bool = False,
               cut_after: int | None = None) -> Reply:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
            return None, {"id": turn.id, "object": "chat.completion.chunk",
                          "created": 1767225600, "model": turn.model,
                          "system_fingerprint": "fp_test",
                          "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                       "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": "" if turn.text else None,
                         "refusal": None})]
        events += [chunk({"content": piece}) for piece in halves(turn.text or "") if piece]
        starts = [chunk({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                         "function": {"name": c.name, "arguments": ""}}]})
                  for i, c in enumerate(turn.calls)]
        deltas = [[chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                   for piece in halves(c.arguments)] for i, c in enumerate(turn.calls)]
        if interleave:
            events += starts + interleaved(deltas, True)
        else:
            events += [e for start, ds in zip(starts, deltas, strict=True) for e in [start, *ds]]
        events.append(chunk({}, turn.why))
        events.append((None, {"id": turn.id, "object": "chat.completion.chunk",
                              "created": 1767225600, "model": turn.model, "choices": [],
                              "usage": self._usage(turn)}))
        events.append((None, "[DONE]"))
        return Reply(events=events, cut_after=cut_after)

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        return _openai_error(status, message, headers)

    def offered(self, body: Any) -> list[str]:
        return [t["function"]["name"] for t in body.get("tools", [])]

    def echoed(self, body: Any) -> dict[str, Any]:
        return {c["id"]: c["function"]["arguments"] for m in body["messages"]
                if m["role"] == "assistant" for c in m.get("tool_calls", [])}

    def results(self, body: Any) -> dict[str, tuple[str, bool]]:
        return {m["tool_call_id"]: (m["content"], False) for m in body["messages"]
                if m["role"] == "tool"}


class ResponsesWire(Wire):
    """OpenAI's Responses API: ``/v1/responses``."""

    def __init__(self) -> None:
        super().__init__(name="openai-responses")

    def model(self, url: str, *, stream: bool = False, client: Any = None,
              **settings: Any) -> ProviderModel:
        where = {"client": client} if client else {"base_url": f"{url}/v1", "api_key": KEY}
        return OpenAIResponsesModel("gpt-test", stream=stream, **where, **settings)

    def client(self, url: str, **options: Any) -> Any:
        return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, **options)

    def _items(self, turn: Turn) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if turn.text is not None:
            items.append({"type": "message", "id": "msg_1", "status": "completed",
                          "role": "assistant", "content": [
                              {"type": "output_text", "text": turn.text, "annotations": [],
                               "logprobs": []}]})
        items += [{"type": "function_call", "id": f"fc_{c.id}", "call_id": c.id,
                   "name": c.name, "arguments": c.arguments, "status": "completed"}
                  for c in turn.calls]
        return items

    def _response(self, turn: Turn, status: str = "", output: Any = None) -> dict[str, Any]:
        given, made, cached = turn.usage
        done = status == ""
        status = status or ("incomplete" if turn.why == "length" else "completed")
        return {
            "id": turn.id, "object": "response", "created_at": 1767225600, "status": status,
            "error": None, "model": turn.model, "output": self._items(turn) if done else output,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete" else None,
            "instructions": None, "max_output_tokens": None, "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
            "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
            "usage": {"input_tokens": given, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": made,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": given + made} if done else None,
            "metadata": {}}

    def reply(self, turn: Turn) -> Reply:
        return Reply(body=self._response(turn))

    def stream(self, turn: Turn, *, interleave: bool = False,
               cut_after: int | None = None) -> Reply:
        sequence = iter(range(10_000))

        def event(kind: str, **fields: Any) -> tuple[str, Any]:
            return kind, {"type": kind, "sequence_number": next(sequence), **fields}

        final = self._response(turn)
        started = self._response(turn, "in_progress", [])
        events = [event("response.created", response=started),
                  event("response.in_progress", response=started)]
        items = self._items(turn)
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events += [
                    event("response.output_item.added", output_index=index,
                          item={**item, "status": "in_progress", "content": []}),
                    event("response.content_part.added", item_id=item["id"],
                          output_index=index, content_index=0,
                          part={"type": "output_text", "text": "", "annotations": [],
                                "logprobs": []})]
                events += [event("response.output_text.delta", item_id=item["id"],
                                 output_index=index, content_index=0, delta=piece,
                                 logprobs=[]) for piece in halves(text) if piece]
                events += [event("response.output_text.done", item_id=item["id"],
                                 output_index=index, content_index=0, text=text, logprobs=[]),
                           event("response.content_part.done", item_id=item["id"],
                                 output_index=index, content_index=0,
                                 part=item["content"][0]),
                           event("response.output_item.done", output_index=index, item=item)]
        calls = [(i, item) for i, item in enumerate(items) if item["type"] == "function_call"]
        events += [event("response.output_item.added", output_index=i,
                         item={**item, "arguments": "", "status": "in_progress"})
                   for i, item in calls]
        events += interleaved([[event("response.function_call_arguments.delta",
                                      item_id=item["id"], output_index=i, delta=piece)
                                for piece in halves(item["arguments"])]
                               for i, item in calls], interleave)
        for i, item in calls:
            events += [event("response.function_call_arguments.done", item_id=item["id"],
                             output_index=i, arguments=item["arguments"]),
                       event("response.output_item.done", output_index=i, item=item)]
        ending = "response.incomplete" if final["status"] == "incomplete" \
            else "response.completed"
        events.append(event(ending, response=final))
        return Reply(events=events, cut_after=cut_after)

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        return _openai_error(status, message, headers)

    def offered(self, body: Any) -> list[str]:
        return [t["name"] for t in body.get("tools", [])]

    def echoed(self, body: Any) -> dict[str, Any]:
        return {i["call_id"]: i["arguments"] for i in body["input"]
                if i.get("type") == "function_call"}

    def results(self, body: Any) -> dict[str, tuple[str, bool]]:
        return {i["call_id"]: (i["output"], False) for i in body["input"]
                if i.get("type") == "function_call_output"}


_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                     403: "permission_error", 404: "not_found_error",
                     422: "invalid_request_error", 429: "rate_limit_error",
                     529: "overloaded_error"}
_STOPS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


class AnthropicWire(Wire):
    """Anthropic's Messages API: ``/v1/messages``."""

    def __init__(self) -> None:
        super().__init__(name="anthropic", sends_objects=True)

    def model(self, url: str, *, stream: bool = False, client: Any = None,
              **settings: Any) -> ProviderModel:
        where = {"client": client} if client else {"base_url": url, "api_key": KEY}
        return AnthropicModel("claude-test", stream=stream, **where, **settings)

    def client(self, url: str, **options: Any) -> Any:
        return anthropic.AsyncAnthropic(base_url=url, api_key=KEY, **options)

    def _usage(self, turn: Turn) -> dict[str, Any]:
        given, made, cached = turn.usage
        return {"input_tokens": given - cached, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached, "output_tokens": made,
                "service_tier": "standard"}

    def _message(self, turn: Turn, content: list[Any], stop: str | None,
                 usage: dict[str, Any]) -> dict[str, Any]:
        return {"id": turn.id, "type": "message", "role": "assistant", "model": turn.model,
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}

    def reply(self, turn: Turn) -> Reply:
        content: list[Any] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name,
                     "input": json.loads(c.arguments)} for c in turn.calls]
        return Reply(body=self._message(turn, content, _STOPS[turn.why], self._usage(turn)))

    def stream(self, turn: Turn, *, interleave: bool = False,
               cut_after: int | None = None) -> Reply:
        """Blocks stream one after another (the Messages API never interleaves them), so
        ``interleave`` changes nothing here."""
        def event(kind: str, **fields: Any) -> tuple[str, Any]:
            return kind, {"type": kind, **fields}

        usage = {**self._usage(turn), "output_tokens": 1}
        events = [event("message_start", message=self._message(turn, [], None, usage)),
                  event("ping")]
        index = 0
        if turn.text:
            events.append(event("content_block_start", index=0,
                                 content_block={"type": "text", "text": ""}))
            events += [event("content_block_delta", index=0,
                             delta={"type": "text_delta", "text": piece})
                       for piece in halves(turn.text)]
            events.append(event("content_block_stop", index=0))
            index = 1
        for i, c in enumerate(turn.calls, start=index):
            events.append(event("content_block_start", index=i, content_block={
                "type": "tool_use", "id": c.id, "name": c.name, "input": {}}))
            events += [event("content_block_delta", index=i,
                             delta={"type": "input_json_delta", "partial_json": piece})
                       for piece in ["", *halves(c.arguments)]]
            events.append(event("content_block_stop", index=i))
        events += [event("message_delta", delta={"stop_reason": _STOPS[turn.why],
                                                 "stop_sequence": None},
                         usage={"output_tokens": turn.usage[1]}),
                   event("message_stop")]
        return Reply(events=events, cut_after=cut_after)

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = _ANTHROPIC_ERRORS.get(status, "api_error")
        return Reply(status=status, headers=headers or {}, body={
            "type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_test"})

    def offered(self, body: Any) -> list[str]:
        return [t["name"] for t in body.get("tools", [])]

    def echoed(self, body: Any) -> dict[str, Any]:
        return {b["id"]: b["input"] for m in body["messages"] if m["role"] == "assistant"
                for b in m["content"] if b["type"] == "tool_use"}

    def results(self, body: Any) -> dict[str, tuple[str, bool]]:
        return {b["tool_use_id"]: (b["content"], b.get("is_error", False))
                for m in body["messages"] if m["role"] == "user"
                for b in m["content"] if b["type"] == "tool_result"}


WIRES: list[Wire] = [ChatWire(), ResponsesWire(), AnthropicWire()]
