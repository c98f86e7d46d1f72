"""``OpenAIChatModel``: OpenAI's Chat Completions API, and every server that speaks it.

The transcript goes out as Chat Completions messages: the assistant's ``tool_calls`` repeat each
call's arguments exactly as the model wrote them, and each tool result is a ``tool`` message
with its call's id. A stream's chunks are assembled, tool calls by their ``index``, into the
completion the same call without streaming returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

from toolvisor.contract import (
    AssistantMessage,
    FinishReason,
    Message,
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
from toolvisor.models._adapter import Body, ProviderModel, arguments_text, tokens

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls",
    "length": "length", "content_filter": "content_filter",
}


class OpenAIChatModel(ProviderModel):
    """A model behind OpenAI's Chat Completions API, or any server that speaks it (vLLM,
    Ollama, LM Studio, llama.cpp's server, OpenRouter, ...) through ``base_url``.

    ``OpenAIChatModel(model, *, base_url=None, api_key=None, client=None, stream=False,
    **settings)``: the key and base URL default to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``;
    ``client`` is an ``openai.AsyncOpenAI``. Settings such as ``temperature``,
    ``max_completion_tokens`` or ``parallel_tool_calls`` go with every request; a streamed one
    asks for its usage (``stream_options``). Needs ``toolvisor[openai]``.
    """

    _SDK = "openai"
    _CLIENT = "AsyncOpenAI"
    _SETS = frozenset({"model", "messages", "tools"})
    _STREAM_SETTINGS: ClassVar[Mapping[str, Any]] = {"stream_options": {"include_usage": True}}

    def _endpoint(self) -> Callable[..., Awaitable[Any]]:
        create: Callable[..., Awaitable[Any]] = self.client.chat.completions.create
        return create

    def _request_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(request.messages)}
        if request.tools:
            body["tools"] = chat_tools(request.tools)
        return body

    def _assembler(self) -> ChatStream:
        return ChatStream()

    def _read(self, body: Body) -> ModelResponse:
        return read_completion(body)


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The transcript as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        match message:
            case SystemMessage(content=content) | UserMessage(content=content):
                out.append({"role": message.role, "content": content})
            case AssistantMessage(content=content, tool_calls=calls):
                item: dict[str, Any] = {"role": "assistant", "content": content}
                if calls:
                    item["tool_calls"] = [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": arguments_text(c)}}
                        for c in calls]
                out.append(item)
            case ToolResultMessage(tool_call_id=call_id, content=content):
                out.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return out


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools on offer as Chat Completions function tools."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.input_schema}} for t in tools]


def read_completion(body: Body) -> ModelResponse:
    """The response a Chat Completions completion says (its first choice)."""
    choices = body.get("choices")
    if not choices:
        raise ModelError("invalid_response", "the completion has no choices",
                         cause=repr(body)[:500])
    choice = choices[0]
    message = choice.get("message") or {}
    content = message.get("content")
    finish = choice.get("finish_reason")
    return ModelResponse(
        text=content if content is not None else message.get("refusal"),
        tool_calls=tuple(_tool_call(c) for c in message.get("tool_calls") or ()),
        finish_reason=None if finish is None else FINISH_REASONS.get(finish, "other"),
        usage=_usage(body.get("usage")), model=body.get("model"), response_id=body.get("id"))


def _tool_call(call: Body) -> ToolCall:
    function = call["function"]
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some compatible servers send an object, not text
        return ToolCall(id=call["id"], name=function["name"], arguments=arguments)
    return ToolCall.from_text(call["id"], function["name"], arguments or "")


def _usage(usage: Body | None) -> Usage | None:
    if not usage:
        return None
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    return Usage(input_tokens=tokens(usage.get("prompt_tokens")),
                 output_tokens=tokens(usage.get("completion_tokens")),
                 cached_tokens=cached if isinstance(cached, int) else None)


class ChatStream:
    """Chat Completions chunks, assembled into the completion they stream (first choice)."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}  # id and model
        self._message: dict[str, Any] = {"role": "assistant", "content": None}
        self._calls: dict[int, dict[str, Any]] = {}  # by index, in the order first seen
        self._finish: str | None = None
        self._usage: Any = None

    def add(self, chunk: Body) -> str | None:
        """Take one chunk; returns its text delta, if it has one."""
        for key in ("id", "model"):
            if chunk.get(key):
                self._head[key] = chunk[key]
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        text = None
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                if isinstance(delta.get(key), str):
                    self._message[key] = (self._message.get(key) or "") + delta[key]
            text = delta.get("content") or None
            for part in delta.get("tool_calls") or ():
                self._add_call(part)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return text

    def _add_call(self, part: Body) -> None:
        call = self._calls.setdefault(part.get("index", 0), {
            "id": None, "type": "function", "function": {"name": None, "arguments": ""}})
        function = part.get("function") or {}
        call["id"] = call["id"] or part.get("id")
        call["function"]["name"] = call["function"]["name"] or function.get("name")
        call["function"]["arguments"] += function.get("arguments") or ""

    def body(self) -> Body:
        """The completion; a stream that ended before its finish reason is ``unavailable``."""
        if self._finish is None:
            raise ModelError("unavailable", "the stream ended before the model finished its "
                             "answer (no finish_reason)")
        message = dict(self._message)
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return {**self._head, "choices": [{"index": 0, "message": message,
                                           "finish_reason": self._finish}],
                "usage": self._usage}
