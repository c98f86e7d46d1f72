"""``LiveSource``: one tool source as last read (its provider, version and manifests), and
``read_source``, the one way a provider is read.

A ``LiveSource`` belongs to the ``CatalogBook`` that holds it, so to whichever thread holds the
registry's lock.
"""

from __future__ import annotations

from toolvisor.registry._provider import ToolManifest, ToolProvider


class LiveSource:
    """One live source as last read."""

    __slots__ = ("join_catalog", "manifests", "provider", "version")

    def __init__(self, provider: ToolProvider, join_catalog: bool) -> None:
        self.provider = provider
        self.join_catalog = join_catalog
        self.version, self.manifests = read_source(provider)


def read_source(provider: ToolProvider) -> tuple[int, dict[str, ToolManifest]]:
    """The provider's version and manifests, in that order (a change in between only costs
    one extra re-read later)."""
    version = provider.version
    manifests: dict[str, ToolManifest] = {}
    for manifest in provider.manifests():
        if not isinstance(manifest, ToolManifest):
            raise TypeError(f"{provider!r}.manifests() must yield ToolManifest objects, "
                            f"got {type(manifest).__name__}")
        if manifest.name in manifests:
            raise ValueError(f"{provider!r} lists two tools named {manifest.name!r}")
        manifests[manifest.name] = manifest
    return version, manifests
