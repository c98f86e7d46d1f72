"""What an ``Agent`` makes of its ``tools`` and model arguments.

``tools`` is one argument for the whole catalog: ``Tool`` objects, MCP servers
(``McpToolProvider``) and at most one ``ToolRegistry``, in a sequence, or a registry alone.
(``on_tool_error`` is read by ``toolvisor.machine.policies_by_tool``, which
``TemporalAgent`` shares.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolvisor.contract import AsyncModel, Model, Tool
from toolvisor.mcp import McpToolProvider
from toolvisor.models import from_string
from toolvisor.registry import StaticToolProvider, ToolRegistry

ToolsArgument = ToolRegistry | Sequence[Tool | McpToolProvider | ToolRegistry]
"""What ``Agent(tools=...)`` takes."""


@dataclass(frozen=True, slots=True)
class Catalog:
    """The agent's catalog: its registry, the tools given as objects (which the machine knows
    by name), and the MCP servers it supervises (each a source of the registry)."""

    registry: ToolRegistry
    tools: tuple[Tool, ...]
    servers: tuple[McpToolProvider, ...]


def catalog(tools: ToolsArgument) -> Catalog:
    """Sort ``tools`` out: the registry (a new one without), its tools (as the source
    ``"agent"`` of a registry given with them) and MCP servers (each the source ``mcp:<name>``).

    Raises:
        TypeError: ``tools`` is neither a registry nor a sequence, holds anything else, or
            holds two registries.
    """
    if isinstance(tools, ToolRegistry):
        return Catalog(tools, (), ())
    if isinstance(tools, Tool | McpToolProvider | str) or not isinstance(tools, Sequence):
        raise TypeError(f"tools must be a sequence of Tool and McpToolProvider objects, or a "
                        f"ToolRegistry; got {type(tools).__name__} (wrap one tool in a list)")
    registries = [item for item in tools if isinstance(item, ToolRegistry)]
    wrong = [item for item in tools if not isinstance(item, Tool | McpToolProvider | ToolRegistry)]
    if wrong:
        raise TypeError(f"tools holds Tool, McpToolProvider and ToolRegistry objects only, got "
                        f"{type(wrong[0]).__name__}")
    if len(registries) > 1:
        raise TypeError("tools holds two ToolRegistry objects: an agent has one catalog; add "
                        "the other's sources to it (registry.add_source)")
    own = tuple(item for item in tools if isinstance(item, Tool))
    if registries:
        registry = registries[0]
        if own:
            registry.add_source("agent", StaticToolProvider(own))
    else:
        registry = ToolRegistry.from_tools(own)
    servers = tuple(item for item in tools if isinstance(item, McpToolProvider))
    for server in servers:
        registry.add_source(server.source, server)
    return Catalog(registry, own, servers)


def model(given: Model | AsyncModel | str, setting: str) -> Model | AsyncModel:
    """A model object, or the provider's model a string names; anything else refused."""
    found = from_string(given) if isinstance(given, str) else given
    if not isinstance(found, Model | AsyncModel):
        raise TypeError(f"{setting} must have respond(request) -> ModelResponse or async "
                        f"arespond(request) -> ModelResponse, got {found!r}")
    return found
