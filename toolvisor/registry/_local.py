"""Providers of in-process ``Tool`` objects: a fixed set, and a set that changes at run time."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from toolvisor.call import execute
from toolvisor.contract import CallContext, Err, HandlerResult, Tool
from toolvisor.registry._provider import PreparedCall, ToolManifest, tool_not_found


def _by_name(tools: Iterable[Tool], owner: str) -> dict[str, Tool]:
    by_name: dict[str, Tool] = {}
    for item in tools:
        if not isinstance(item, Tool):
            raise TypeError(f"{owner} takes Tool objects (build them with @function_tool or "
                            f"@tool), got {type(item).__name__}")
        if item.name in by_name:
            raise ValueError(f"{owner}: two tools are named {item.name!r}; tool names must be "
                             "unique within a provider")
        by_name[item.name] = item
    return by_name


class _InProcessProvider:
    """Serves a name -> ``Tool`` mapping and its manifests; subclasses decide how they change.

    ``_tools`` and ``_manifests`` are replaced whole, never mutated, so readers need no lock.
    """

    __slots__ = ("_manifests", "_tools")

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: Mapping[str, Tool] = _by_name(tools, type(self).__name__)
        self._manifests = tuple(ToolManifest.of(t) for t in self._tools.values())

    def manifests(self) -> tuple[ToolManifest, ...]:
        return self._manifests

    def resolve(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def prepare(self, name: str, arguments: Any, ctx: CallContext) -> PreparedCall | Err:
        found = self._tools.get(name)
        if found is None:
            return tool_not_found(name, ctx, f"no tool named {name!r} in this provider")
        return PreparedCall(tool=found, arguments=arguments, ctx=ctx)

    def execute(self, call: PreparedCall) -> HandlerResult:
        """Run the call in the calling thread (``async def`` tools go through a ``ToolRunner``)."""
        return execute(call.tool, call.arguments, call.ctx)


class StaticToolProvider(_InProcessProvider):
    """A fixed set of tools, given once; its manifests are built once and cached.

    Immutable after construction, so any thread may read it.
    """

    __slots__ = ()

    @property
    def version(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"StaticToolProvider({list(self._tools)})"


class DynamicToolProvider(_InProcessProvider):
    """A set of tools that changes at run time; ``version`` counts the real changes.

    Writers (``add``, ``remove``) take ``_lock`` and publish a new immutable tools mapping and
    manifests tuple; readers take the current ones without locking.
    """

    __slots__ = ("_lock", "_version")

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        super().__init__(tools)
        self._lock = threading.Lock()
        self._version = 0

    def _publish(self, tools: dict[str, Tool]) -> None:
        # Caller holds _lock. Manifests before version: a reader that sees the new version
        # then reads manifests gets these or newer ones.
        self._tools = tools
        self._manifests = tuple(ToolManifest.of(t) for t in tools.values())
        self._version += 1

    def add(self, tool: Tool, *, replace: bool = False) -> bool:
        """Add ``tool``; with ``replace`` a tool of the same name is swapped for it.

        Returns whether the set changed (re-adding the very same tool does not change it).
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"DynamicToolProvider.add takes a Tool, got {type(tool).__name__}")
        with self._lock:
            current = self._tools.get(tool.name)
            if current is tool:
                return False
            if current is not None and not replace:
                raise ValueError(f"DynamicToolProvider already has a tool named {tool.name!r}; "
                                 "pass replace=True to swap it")
            self._publish({**self._tools, tool.name: tool})
            return True

    def replace_all(self, tools: Iterable[Tool]) -> None:
        """Swap the whole set for ``tools`` in one change: a source listed again from
        elsewhere (an MCP server's tools)."""
        by_name = _by_name(tools, type(self).__name__)
        with self._lock:
            self._publish(by_name)

    def remove(self, name: str) -> bool:
        """Remove the tool named ``name``; returns whether there was one."""
        with self._lock:
            if name not in self._tools:
                return False
            self._publish({k: v for k, v in self._tools.items() if k != name})
            return True

    @property
    def version(self) -> int:
        return self._version

    def __repr__(self) -> str:
        return f"DynamicToolProvider({list(self._tools)}, version={self._version})"
