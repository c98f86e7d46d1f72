"""Messages, tool calls and the model request/response: plain pydantic data, JSON round-trippable.

These are what a checkpoint stores, so every one of them is frozen and has a stable JSON shape.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import ConfigDict, Field, model_validator

from toolvisor.contract._errors import Violation
from toolvisor.contract._frozen import FrozenModel


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load_arguments(text: str) -> Any:
    """The JSON value of a model's arguments text; blank text is an empty object."""
    if not text.strip():
        return {}
    return json.loads(text, parse_constant=_refuse_constant)


class ToolCall(FrozenModel):
    """One tool call the model asked for: its id, the tool's name and the arguments object.

    ``raw_arguments`` is the model's own arguments text, kept byte for byte when its provider
    sends text (OpenAI's do), so the transcript sent back repeats exactly what the model wrote.
    ``arguments`` is then what that text parses to, or ``{}`` when it is not a JSON object:
    :meth:`arguments_violation` says why, and such a call never runs (its result is
    ``InvalidArguments``, so the model can try again).
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None

    @model_validator(mode="after")
    def _parse_raw_arguments(self) -> ToolCall:
        """``arguments`` is what ``raw_arguments`` parses to (filled in when not given). An
        ``after`` validator: a ``before`` one would turn a checkpoint's JSON into Python
        objects first, for every call of the run."""
        if self.raw_arguments is None:
            return self
        try:
            parsed = _load_arguments(self.raw_arguments)
        except ValueError:
            parsed = None
        expected = parsed if isinstance(parsed, dict) else {}
        if not self.arguments:
            object.__setattr__(self, "arguments", expected)  # still being built: frozen after
            self.__pydantic_fields_set__.add("arguments")
        elif self.arguments != expected:
            raise ValueError("ToolCall.arguments must be what raw_arguments parses to")
        return self

    @classmethod
    def from_text(cls, id: str, name: str, text: str) -> ToolCall:
        """The call a model sent with its arguments as text (kept as ``raw_arguments``)."""
        return cls(id=id, name=name, raw_arguments=text)

    def arguments_violation(self) -> Violation | None:
        """Why ``raw_arguments`` is no arguments object (not JSON, or JSON but not an object);
        ``None`` when it is one, or when the provider sent an object rather than text."""
        if self.raw_arguments is None:
            return None
        try:
            value = _load_arguments(self.raw_arguments)
        except ValueError as exc:
            return Violation("$", f"the arguments are not valid JSON: {exc}", "json")
        if not isinstance(value, dict):
            return Violation("$", f"the arguments must be a JSON object, got "
                             f"{_JSON_KINDS.get(type(value), 'a number')}", "type")
        return None


_JSON_KINDS: dict[type, str] = {list: "an array", str: "a string", bool: "a boolean",
                                type(None): "null"}


class ToolSpec(FrozenModel):
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


class _MessageModel(FrozenModel):
    """A message's base: an instance of a subclass is revalidated into the message's own class,
    so a run holds exactly the classes of ``Message`` and a checkpoint writes each message with
    its own class's serializer (a subclass's extra fields would not restore)."""

    model_config = ConfigDict(revalidate_instances="subclass-instances")


class SystemMessage(_MessageModel):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_MessageModel):
    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_MessageModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ToolResultMessage(_MessageModel):
    """The result of one tool call, as text for the model; ``is_error`` marks failures."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]


class ModelRequest(FrozenModel):
    """What the runtime asks a model: the conversation so far and the tools on offer.

    ``attempt`` is which try at this turn's answer the request is: 1, then 2 when a failed
    model call is asked again, and so on (the conversation is the same). A provider ignores
    it; a scripted model reads its step from it and the conversation.

    ``model`` names which of the agent's models a direct completion asks (``Agent(models=
    {name: model})``); ``None`` is the run's model. A run's own requests never set it.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    attempt: int = Field(default=1, ge=1)
    model: str | None = None


FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "other"]
"""Why a model stopped, the same for every provider: ``length`` means its output was cut off
at the token limit (OpenAI's ``length``, Anthropic's ``max_tokens``)."""


class Usage(FrozenModel):
    """The tokens model calls used, as their provider reported them; ``+`` sums them.

    ``input_tokens`` counts every input token, cached ones included; ``cached_tokens`` those read
    from the provider's prompt cache, or ``None`` where no call reported it.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        cached = None if self.cached_tokens is None and other.cached_tokens is None else \
            (self.cached_tokens or 0) + (other.cached_tokens or 0)
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens, cached_tokens=cached)


class ModelResponse(FrozenModel):
    """A model's answer: text, tool calls, or both. No tool calls means the turn is done.

    ``finish_reason`` says why it stopped (``length``: cut off, so its tool calls never run);
    ``usage``, ``model`` (the model that answered) and ``response_id`` are the provider's, when
    it says.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    model: str | None = None
    response_id: str | None = None


@runtime_checkable
class Model(Protocol):
    """An LLM, as the runtime sees it: a request in, a response out (blocking).

    The runtime runs it on a bounded thread pool, never on the orchestrator's thread.
    """

    def respond(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class AsyncModel(Protocol):
    """An LLM with a coroutine: run on the runtime's one event loop, no thread per call.

    A model that has both ``arespond`` and ``respond`` is called through ``arespond``.
    """

    async def arespond(self, request: ModelRequest) -> ModelResponse: ...
