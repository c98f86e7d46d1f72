"""``CatalogBook``: a registry's mutable catalog and its rules (ownership, membership,
generation); ``commit`` builds the ``View`` it publishes.

The book belongs to whichever thread holds the registry's lock.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from toolvisor._logging import EventLog
from toolvisor.registry._live_source import LiveSource, read_source
from toolvisor.registry._provider import ToolManifest
from toolvisor.registry._state import SourceState, ToolState
from toolvisor.registry._view import View


class CatalogBook:
    """The live sources, which source owns each tool name, the members, and the orphans a
    restored snapshot awaits; ``commit`` moves ``generation`` only on a real change."""

    __slots__ = ("_fingerprint", "_log", "awaited", "generation", "members", "owners", "sources")

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self.sources: dict[str, LiveSource] = {}
        self.owners: dict[str, str] = {}
        self.members: set[str] = set()
        self.awaited: dict[str, SourceState] = {}
        self.generation = 0
        self._fingerprint = self._fingerprint_now()

    def sync(self) -> None:
        """Re-read every source whose provider's version moved and settle its membership."""
        changed: dict[str, SourceState] = {}
        for name, source in self.sources.items():
            if source.provider.version != source.version:
                changed[name] = self.source_state(name)
                source.version, source.manifests = read_source(source.provider)
        if not changed:
            return
        self.reindex()
        for name, known in changed.items():
            self.settle(name, known, self.sources[name].join_catalog)
            self._log.info("tool_source_changed", source=name,
                           tools=list(self.sources[name].manifests))

    def check_conflicts(self, name: str, source: LiveSource) -> None:
        for tool_name in source.manifests:
            owner = self.owners.get(tool_name)
            if owner is not None and owner != name:
                raise ValueError(f"tool {tool_name!r} is already provided by source {owner!r}; "
                                 "tool names must be unique across sources")

    def reindex(self) -> None:
        """Give every tool name one owning source; a name keeps the owner it had."""
        owners = {tool: owner for tool, owner in self.owners.items()
                  if owner in self.sources and tool in self.sources[owner].manifests}
        for name, source in self.sources.items():
            for tool_name in source.manifests:
                owner = owners.setdefault(tool_name, name)
                if owner != name:
                    self._log.warning("tool_shadowed", tool=tool_name, source=name, owner=owner)
        self.owners = owners
        self.members = {m for m in self.members if m in owners
                        and not self.sources[owners[m]].manifests[m].internal}

    def offered(self, name: str) -> list[str]:
        """The tools source ``name`` owns that may be members (not internal), in its order."""
        source = self.sources[name]
        return [t for t, m in source.manifests.items()
                if self.owners.get(t) == name and not m.internal]

    def source_state(self, name: str) -> SourceState:
        source = self.sources[name]
        owned = [t for t in source.manifests if self.owners.get(t) == name]
        return SourceState(tools=tuple(owned),
                           members=tuple(t for t in owned if t in self.members))

    def settle(self, name: str, known: SourceState | None, join: bool) -> tuple[str, ...]:
        """Set source ``name``'s members from what was known of it; returns the known
        members it no longer offers."""
        known_tools = set(known.tools) if known is not None else set()
        known_members = set(known.members) if known is not None else set()
        offered = self.offered(name)
        for tool_name in offered:
            if tool_name in known_members or (join and tool_name not in known_tools):
                self.members.add(tool_name)
            else:
                self.members.discard(tool_name)
        return tuple(sorted(known_members - set(offered)))

    def _fingerprint_now(self) -> Any:
        return (
            tuple((name, tuple(s.manifests.values())) for name, s in self.sources.items()),
            tuple(sorted(self.owners.items())),
            frozenset(self.members),
            tuple(sorted(self.awaited.items())),
        )

    def commit(self) -> View:
        """Move the generation if anything really changed; the view to publish."""
        fingerprint = self._fingerprint_now()
        if fingerprint != self._fingerprint:
            self._fingerprint = fingerprint
            self.generation += 1
        catalog: list[ToolManifest] = []
        manifests: dict[str, ToolManifest] = {}
        sources: dict[str, SourceState] = {}
        for name, source in self.sources.items():
            sources[name] = self.source_state(name)
            for tool_name, manifest in source.manifests.items():
                if self.owners.get(tool_name) == name:
                    manifests[tool_name] = manifest
                    if tool_name in self.members:
                        catalog.append(manifest)
        return View(
            state=ToolState(generation=self.generation, sources=sources,
                            orphans=dict(self.awaited)),
            providers=MappingProxyType({n: s.provider for n, s in self.sources.items()}),
            owners=MappingProxyType(dict(self.owners)),
            manifests=MappingProxyType(manifests),
            catalog=tuple(catalog),
            members=frozenset(self.members),
            versions=tuple((s.provider, s.version) for s in self.sources.values()),
        )
