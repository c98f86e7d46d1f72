"""``View``: the immutable catalog a registry publishes after each write.

A ``View`` never changes once built, so tool-call threads read it without locking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toolvisor.registry._provider import ToolManifest, ToolProvider
from toolvisor.registry._state import ToolState


@dataclass(frozen=True, slots=True)
class View:
    """What readers see: an immutable snapshot published by each write."""

    state: ToolState
    providers: Mapping[str, ToolProvider]
    owners: Mapping[str, str]
    manifests: Mapping[str, ToolManifest]
    catalog: tuple[ToolManifest, ...]
    members: frozenset[str]
    versions: tuple[tuple[ToolProvider, int], ...]
