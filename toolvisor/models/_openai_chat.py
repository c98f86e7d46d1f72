"""``OpenAIChatModel``: OpenAI's Chat Completions API, and every server that speaks it.

The transcript goes out as Chat Completions messages: the assistant's ``tool_calls`` repeat each
call's arguments exactly as the model wrote them, and each tool result is a ``tool`` message
with its call's id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

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

    ``OpenAIChatModel(model, *, base_url=None, api_key=None, client=None, **settings)``: the
    key and base URL default to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; ``client`` is an
    ``openai.AsyncOpenAI``. Settings such as ``temperature``, ``max_completion_tokens`` or
    ``parallel_tool_calls`` go with every request. Needs ``toolvisor[openai]``.
    """

    _SDK = "openai"
    _CLIENT = "AsyncOpenAI"
    _SETS = frozenset({"model", "messages", "tools"})

    def _endpoint(self) -> Callable[..., Awaitable[Any]]:
        create: Callable[..., Awaitable[Any]] = self.client.chat.completions.create
        return create

    def _request_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(request.messages)}
        if request.tools:
            body["tools"] = chat_tools(request.tools)
        return body

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

