"""The registry's serialisable state: which sources provide which tools, and which are members."""

from __future__ import annotations

from pydantic import Field

from toolvisor.contract import FrozenModel, ToolvisorError


class SourceState(FrozenModel):
    """One source as a snapshot saw it: every tool it provided, and those in the catalog."""

    tools: tuple[str, ...] = ()
    members: tuple[str, ...] = ()


class ToolState(FrozenModel):
    """A JSON snapshot of a registry's catalog, taken at one ``generation``.

    ``sources`` are the live sources; ``orphans`` are sources the snapshot knew but that were
    missing: their member tools are kept outside the catalog until the source comes back.
    """

    generation: int = Field(ge=0)
    sources: dict[str, SourceState] = Field(default_factory=dict)
    orphans: dict[str, SourceState] = Field(default_factory=dict)

    def members(self) -> frozenset[str]:
        """Every tool in the catalog of this snapshot."""
        return frozenset(name for source in self.sources.values() for name in source.members)


class RestoreReport(FrozenModel):
    """What ``restore_state`` did: the catalog it rebuilt, what it orphaned, what it dropped.

    ``orphans`` maps a missing source to its member tools kept outside the catalog;
    ``dropped`` maps a live source to member tools it no longer provides.
    """

    members: tuple[str, ...]
    orphans: dict[str, tuple[str, ...]]
    dropped: dict[str, tuple[str, ...]]


class GenerationMismatchError(ToolvisorError, ValueError):
    """``apply_state`` was given a state made from another generation of the registry."""

    def __init__(self, expected: int, given: int) -> None:
        self.expected = expected
        self.given = given
        super().__init__(
            f"tool state is from generation {given} but the registry is at generation "
            f"{expected}: the tools or the catalog changed since it was taken; take a fresh "
            "state() and apply your change to it"
        )


class UnknownToolError(ToolvisorError, LookupError):
    """A catalog edit named a tool that no live source provides."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown tool"


class UnknownSourceError(ToolvisorError, LookupError):
    """A source operation named a source the registry does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown source"
