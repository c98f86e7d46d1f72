"""Messages, tool calls and the model request/response: plain pydantic data, JSON round-trippable.

These are what a checkpoint stores, so every one of them is frozen and has a stable JSON shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """One tool call the model asked for: its id, the tool's name and the arguments object."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolSpec(_Frozen):
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Frozen):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ToolResultMessage(_Frozen):
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


class ModelRequest(_Frozen):
    """What the runtime asks a model: the conversation so far and the tools on offer."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()


class ModelResponse(_Frozen):
    """A model's answer: text, tool calls, or both. No tool calls means the turn is done."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


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
