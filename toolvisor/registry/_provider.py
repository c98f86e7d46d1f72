"""What a tool source is: the ``ToolProvider`` protocol, its manifests and prepared calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolvisor.contract import (
    CallContext,
    Err,
    HandlerResult,
    OutputWindow,
    Tool,
    ToolError,
    ToolSpec,
)


@dataclass(frozen=True, slots=True)
class ToolManifest:
    """What a provider says about one tool without running it: its spec and its flags."""

    spec: ToolSpec
    internal: bool = False
    output_window: OutputWindow = "head"

    @property
    def name(self) -> str:
        return self.spec.name

    @classmethod
    def of(cls, tool: Tool) -> ToolManifest:
        """The manifest of a local ``Tool``."""
        return cls(spec=tool.spec, internal=tool.internal, output_window=tool.output_window)


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call bound to the tool that will run it: ready for ``execute`` or a ``ToolRunner``."""

    tool: Tool
    arguments: Any
    ctx: CallContext


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools: lists them, resolves them by name, prepares and executes calls.

    ``version`` changes whenever the set of tools changes; a registry re-reads ``manifests()``
    when it sees a new version. A provider never calls back into a registry, and its
    ``version`` and ``manifests`` are cheap: a registry reads them while holding its lock.
    """

    @property
    def version(self) -> int: ...

    def manifests(self) -> Sequence[ToolManifest]: ...

    def resolve(self, name: str) -> Tool | None: ...

    def prepare(self, name: str, arguments: Any, ctx: CallContext) -> PreparedCall | Err: ...

    def execute(self, call: PreparedCall) -> HandlerResult: ...


def tool_not_found(name: str, ctx: CallContext, why: str) -> Err:
    """``Err(ToolError("not_found"))`` for a name the model may not (or cannot) call."""
    return Err(ToolError(
        "not_found",
        f"tool error ({name}): not_found: {why}",
        tool_name=name,
        tool_call_id=ctx.tool_call_id,
    ))
