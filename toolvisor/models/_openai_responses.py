"""``OpenAIResponsesModel``: OpenAI's Responses API (``function_call`` / ``function_call_output``
items).

The transcript goes out as input items: each call the model made is a ``function_call`` item
repeating its arguments exactly as the model wrote them, each result a
``function_call_output`` with the call's ``call_id``. A stream's events are assembled, item by
item, into the response the same call without streaming returns.
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
from toolvisor.models._errors import error_fields, stream_error_reason

INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "length", "content_filter": "content_filter"}
_ENDINGS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class OpenAIResponsesModel(ProviderModel):
    """A model behind OpenAI's Responses API; the same arguments as ``OpenAIChatModel``.

    Settings such as ``max_output_tokens``, ``reasoning`` or ``store`` go with every request.
    The whole transcript is sent each time (no ``previous_response_id``). Needs
    ``toolvisor[openai]``.
    """

    _SDK = "openai"
    _CLIENT = "AsyncOpenAI"
    _SETS = frozenset({"model", "input", "tools"})

    def _endpoint(self) -> Callable[..., Awaitable[Any]]:
        create: Callable[..., Awaitable[Any]] = self.client.responses.create
        return create

    def _request_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": response_input(request.messages)}
        if request.tools:
            body["tools"] = response_tools(request.tools)
        return body

    def _assembler(self) -> ResponseStream:
        return ResponseStream()

    def _read(self, body: Body) -> ModelResponse:
        return read_response(body)


def response_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The transcript as Responses API input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        match message:
            case SystemMessage(content=content) | UserMessage(content=content):
                items.append({"role": message.role, "content": content})
            case AssistantMessage(content=content, tool_calls=calls):
                if content:
                    items.append({"role": "assistant", "content": content})
                items.extend({"type": "function_call", "call_id": c.id, "name": c.name,
                              "arguments": arguments_text(c)} for c in calls)
            case ToolResultMessage(tool_call_id=call_id, content=content):
                items.append({"type": "function_call_output", "call_id": call_id,
                              "output": content})
    return items


def response_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools on offer as Responses API function tools (not strict: any JSON schema)."""
    return [{"type": "function", "name": t.name, "description": t.description,
             "parameters": t.input_schema, "strict": False} for t in tools]


def read_response(body: Body) -> ModelResponse:
    """The response a Responses API response object says."""
    status = body.get("status")
    if status == "failed":
        kind, message = error_fields(body.get("error"), "the response failed")
        raise ModelError(stream_error_reason(kind), f"the response failed ({kind}): {message}",
                         cause=body.get("error"))
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in body.get("output") or ():
        if item.get("type") == "message":
            texts.extend(part.get("text") or part.get("refusal") or ""
                         for part in item.get("content") or ())
        elif item.get("type") == "function_call":
            calls.append(ToolCall.from_text(item["call_id"], item["name"],
                                            item.get("arguments") or ""))
    if status == "incomplete":
        why = (body.get("incomplete_details") or {}).get("reason")
        finish: FinishReason = INCOMPLETE_REASONS.get(str(why), "other")
    else:
        finish = "tool_calls" if calls else "stop" if status == "completed" else "other"
    return ModelResponse(text="".join(texts) if texts else None, tool_calls=tuple(calls),
                         finish_reason=finish, usage=_usage(body.get("usage")),
                         model=body.get("model"), response_id=body.get("id"))


def _usage(usage: Body | None) -> Usage | None:
    if not usage:
        return None
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
    return Usage(input_tokens=tokens(usage.get("input_tokens")),
                 output_tokens=tokens(usage.get("output_tokens")),
                 cached_tokens=cached if isinstance(cached, int) else None)


class ResponseStream:
    """Responses API stream events, assembled into the response they stream."""

    def __init__(self) -> None:
        self._items: dict[int, dict[str, Any]] = {}  # by output_index
        self._final: Body | None = None

    def add(self, event: Body) -> str | None:
        """Take one event; returns its text delta, if it has one."""
        kind = event.get("type")
        if kind == "error":
            code, message = event.get("code"), event.get("message")
            raise ModelError(stream_error_reason(code), f"the provider's stream failed "
                             f"({code}): {message}", cause=dict(event))
        if kind in _ENDINGS:
            self._final = event["response"]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._items[event["output_index"]] = dict(event["item"])
        elif kind == "response.content_part.added":
            item = self._items[event["output_index"]]
            item["content"] = [*(item.get("content") or ()), dict(event["part"])]
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            part = self._items[event["output_index"]]["content"][event["content_index"]]
            key = "text" if kind == "response.output_text.delta" else "refusal"
            part[key] = (part.get(key) or "") + event["delta"]
            return event["delta"] if key == "text" else None
        elif kind == "response.function_call_arguments.delta":
            item = self._items[event["output_index"]]
            item["arguments"] = (item.get("arguments") or "") + event["delta"]
        return None

    def body(self) -> Body:
        """The response; a stream that ended before its last event is ``unavailable``."""
        if self._final is None:
            raise ModelError("unavailable", "the stream ended before the response did (no "
                             "response.completed event)")
        return {**self._final, "output": [self._items[i] for i in sorted(self._items)]}
