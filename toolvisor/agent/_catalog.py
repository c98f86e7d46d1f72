"""What an ``Agent`` makes of its ``tools``, ``on_tool_error`` and model arguments.

``tools`` is one argument for the whole catalog: ``Tool`` objects, MCP servers
(``McpToolProvider``) and at most one ``ToolRegistry``, in a sequence, or a registry alone.
``on_tool_error`` is one policy, or a policy by tool name with ``"*"`` for the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolvisor.contract import AsyncModel, Model, Tool
from toolvisor.machine import Policy
from toolvisor.mcp import McpToolProvider
from toolvisor.models import from_string
from toolvisor.registry import StaticToolProvider, ToolRegistry

ToolsArgument = ToolRegistry | Sequence[Tool | McpToolProvider | ToolRegistry]
"""What ``Agent(tools=...)`` takes."""
EVERY_OTHER_TOOL = "*"
"""The key of ``on_tool_error``'s mapping that names the policy of every tool it does not name."""


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


def tool_policies(on_tool_error: Policy | Mapping[str, Policy],
                  registry: ToolRegistry) -> tuple[Policy, dict[str, Policy]]:
    """``on_tool_error`` as the default policy and the overrides by tool name.

    Raises:
        ValueError: The mapping names a tool that is not in the catalog.
    """
    if not isinstance(on_tool_error, Mapping):
        return on_tool_error, {}
    policies = dict(on_tool_error)
    default = policies.pop(EVERY_OTHER_TOOL, "continue")
    for name in policies:
        if not isinstance(registry.resolve(name), Tool):
            raise ValueError(f"on_tool_error names unknown tool {name!r}; known tools: "
                             f"{sorted(registry.members())} (use {EVERY_OTHER_TOOL!r} for every "
                             "other tool)")
    return default, policies


def model(given: Model | AsyncModel | str, setting: str) -> Model | AsyncModel:
    """A model object, or the provider's model a string names; anything else refused."""
    found = from_string(given) if isinstance(given, str) else given
    if not isinstance(found, Model | AsyncModel):
        raise TypeError(f"{setting} must have respond(request) -> ModelResponse or async "
                        f"arespond(request) -> ModelResponse, got {found!r}")
    return found
