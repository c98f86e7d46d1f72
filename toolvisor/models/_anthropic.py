"""``AnthropicModel``: Anthropic's Messages API (``tool_use`` / ``tool_result`` blocks).

The transcript goes out as alternating user and assistant messages: the system prompt is the
top-level ``system``, the results of one turn's tool calls are grouped in one user message
(``tool_result`` blocks, ``is_error`` on failed ones, before any text that follows), and each
``tool_use`` repeats the input the model sent. Anthropic sends a call's input as an object;
streamed, it comes as JSON text, kept as the call's raw arguments only when it is no object
(such a call never runs, and goes back as ``{}``: the API takes nothing else). A stream's
events are assembled, block by block, into the message the same call without streaming returns.
"""

from __future__ import annotations

import json
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
from toolvisor.models._adapter import Body, ProviderModel, tokens

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when the settings do not give it (the Messages API requires one)."""

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


class AnthropicModel(ProviderModel):
    """A Claude model behind Anthropic's Messages API.

    ``AnthropicModel(model, *, base_url=None, api_key=None, client=None, stream=False,
    **settings)``: the key and base URL default to ``ANTHROPIC_API_KEY`` and
    ``ANTHROPIC_BASE_URL``; ``client`` is an ``anthropic.AsyncAnthropic``. Settings such as
    ``max_tokens`` (default 4096), ``temperature`` or ``thinking`` go with every request. Needs
    ``toolvisor[anthropic]``.
    """

    _SDK = "anthropic"
    _CLIENT = "AsyncAnthropic"
    _SETS = frozenset({"model", "messages", "system", "tools"})

    def _endpoint(self) -> Callable[..., Awaitable[Any]]:
        create: Callable[..., Awaitable[Any]] = self.client.messages.create
        return create

    def _request_body(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = anthropic_messages(request.messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": DEFAULT_MAX_TOKENS,
                                "messages": messages}
        if system is not None:
            body["system"] = system
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
        return body

    def _assembler(self) -> MessageStream:
        return MessageStream()

    def _read(self, body: Body) -> ModelResponse:
        return read_message(body)


def anthropic_messages(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """The transcript as the Messages API's ``system`` and ``messages``: consecutive messages
    of one role are merged, so one turn's tool results form one user message."""
    system = [m.content for m in messages if isinstance(m, SystemMessage)]
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        elif blocks:
            out.append({"role": role, "content": blocks})

    for message in messages:
        match message:
            case UserMessage(content=content):
                add("user", [{"type": "text", "text": content}])
            case AssistantMessage(content=content, tool_calls=calls):
                add("assistant", [{"type": "text", "text": content}] if content else [])
                add("assistant", [{"type": "tool_use", "id": c.id, "name": c.name,
                                   "input": c.arguments} for c in calls])
            case ToolResultMessage(tool_call_id=call_id, content=content, is_error=failed):
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id,
                                         "content": content}
                if failed:
                    block["is_error"] = True
                add("user", [block])
    return ("\n\n".join(system) if system else None), out


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools on offer as Messages API tools."""
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools]


def read_message(body: Body) -> ModelResponse:
    """The response a Messages API message says."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in body.get("content") or ():
        if block.get("type") == "text":
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(_tool_use(block))
    stop = body.get("stop_reason")
    return ModelResponse(text="".join(texts) if texts else None, tool_calls=tuple(calls),
                         finish_reason=None if stop is None else STOP_REASONS.get(stop, "other"),
                         usage=_usage(body.get("usage")), model=body.get("model"),
                         response_id=body.get("id"))


def _tool_use(block: Body) -> ToolCall:
    arguments = block.get("input")
    if isinstance(arguments, dict):
        return ToolCall(id=block["id"], name=block["name"], arguments=arguments)
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall.from_text(block["id"], block["name"], text)


def _usage(usage: Body | None) -> Usage | None:
    if not usage:
        return None
    cached = usage.get("cache_read_input_tokens")
    return Usage(input_tokens=tokens(usage.get("input_tokens")) + tokens(cached)
                 + tokens(usage.get("cache_creation_input_tokens")),
                 output_tokens=tokens(usage.get("output_tokens")),
                 cached_tokens=cached if isinstance(cached, int) else None)


class MessageStream:
    """Messages API stream events, assembled into the message they stream."""

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}  # by index
        self._json: dict[int, str] = {}  # a tool_use block's input, as streamed
        self._stopped = False

    def add(self, event: Body) -> str | None:
        """Take one event; returns its text delta, if it has one."""
        kind = event.get("type")
        if kind == "message_start":
            self._message = dict(event["message"])
        elif kind == "content_block_start":
            self._blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            return self._delta(event["index"], event["delta"])
        elif kind == "message_delta":
            message = self._started()
            message.update({k: v for k, v in event["delta"].items() if v is not None})
            usage = {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            message["usage"] = {**(message.get("usage") or {}), **usage}
        elif kind == "message_stop":
            self._stopped = True
        return None

    def _delta(self, index: int, delta: Body) -> str | None:
        block = self._blocks[index]
        if delta.get("type") == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return str(delta["text"]) or None
        if delta.get("type") == "input_json_delta":
            self._json[index] = self._json.get(index, "") + delta["partial_json"]
        return None

    def _started(self) -> dict[str, Any]:
        if self._message is None:
            raise ModelError("invalid_response", "the stream did not start with message_start")
        return self._message

    def body(self) -> Body:
        """The message; a stream that ended before ``message_stop`` is ``unavailable``."""
        if not self._stopped:
            raise ModelError("unavailable", "the stream ended before the message did (no "
                             "message_stop event)")
        for index, text in self._json.items():
            try:
                value = json.loads(text) if text.strip() else {}
            except ValueError:
                value = None
            self._blocks[index]["input"] = value if isinstance(value, dict) else text
        return {**self._started(), "content": [self._blocks[i] for i in sorted(self._blocks)]}
