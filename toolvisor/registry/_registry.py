"""``ToolRegistry``: one agent's tool catalog over named tool sources.

Catalog membership is the execution gate: only members are offered to the model and only
members run; any other name comes back as ``Err(ToolError("not_found"))`` without its handler
running. ``generation`` moves exactly when the tools on offer or the membership really change.

Ownership and threading: the mutable catalog, a ``CatalogBook``, belongs to whichever thread
holds ``_lock``; every write takes it and ends by publishing the book's new immutable ``View``.
Readers (tool-call threads resolving and executing) take the current view without locking, so
the hot path is one attribute read plus a version check per source. A lock rather than an owning
actor: catalog edits come from handlers running inside tool calls, which must see their edit
applied when ``add`` returns, and routing every resolve through an actor mailbox would put a
message round trip on each call. The lock is never held while a handler runs; under it the
registry only calls providers' ``version`` and ``manifests``, which never call back into a
registry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import CallContext, Err, HandlerResult, Tool, ToolSpec
from toolvisor.registry._catalog_book import CatalogBook
from toolvisor.registry._live_source import LiveSource
from toolvisor.registry._local import StaticToolProvider
from toolvisor.registry._provider import PreparedCall, ToolManifest, ToolProvider, tool_not_found
from toolvisor.registry._state import (
    GenerationMismatchError,
    RestoreReport,
    ToolState,
    UnknownSourceError,
    UnknownToolError,
)
from toolvisor.registry._view import View

_NAMES_SHOWN = 50


def _shown(names: Iterable[str]) -> str:
    ordered = sorted(names)
    more = len(ordered) - _NAMES_SHOWN
    listed = ", ".join(ordered[:_NAMES_SHOWN]) or "(none)"
    return f"{listed}, and {more} more" if more > 0 else listed


class ToolRegistry:
    """The tools of one session: named sources, and which of their tools are in the catalog.

    Adding a source with ``join_catalog=True`` (the default) puts its tools in the catalog, and
    later the tools it gains at run time. Tool names are unique across live sources: adding a
    source that provides a name another source has is refused; a name a dynamic source gains
    later stays with the source that had it first. Internal tools are never members; the host
    runs them with :meth:`execute_internal`.
    """

    def __init__(self, sources: Mapping[str, ToolProvider] | None = None) -> None:
        self._lock = threading.Lock()
        self._log = get_event_log("registry")
        self._book = CatalogBook(self._log)
        self._view = self._book.commit()
        self._process_tools: tuple[View | None, tuple[str, ...]] = (None, ())  # of that view
        for name, provider in (sources or {}).items():
            self.add_source(name, provider)

    @classmethod
    def from_tools(cls, tools: Iterable[Tool], *, source: str = "tools") -> ToolRegistry:
        """A registry with one static source holding ``tools``, all of them in the catalog."""
        return cls({source: StaticToolProvider(tools)})

    # -- sources ---------------------------------------------------------------------------

    def add_source(self, name: str, provider: ToolProvider, *, join_catalog: bool = True) -> None:
        """Add a named source. Its tools join the catalog if ``join_catalog``.

        A source that a restored snapshot was waiting for gets its orphans back as members,
        exactly as the snapshot had them.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a source name must be a non-empty str, got {name!r}")
        _check_provider(provider)
        with self._lock:
            book = self._book
            book.sync()
            if name in book.sources:
                raise ValueError(f"tool source {name!r} already exists; use replace_source() "
                                 "to swap its provider")
            source = LiveSource(provider, join_catalog)
            book.check_conflicts(name, source)
            book.sources[name] = source
            book.reindex()
            known = book.awaited.pop(name, None)
            dropped = book.settle(name, known, join_catalog)
            self._view = book.commit()
            self._log.info("tool_source_added", source=name, tools=list(source.manifests),
                           generation=book.generation)
            if known is not None:
                self._log.info("orphans_rebound", source=name, dropped=list(dropped),
                               generation=book.generation)

    def replace_source(self, name: str, provider: ToolProvider, *,
                       join_catalog: bool | None = None) -> None:
        """Swap the provider of source ``name``. Members it still provides stay members; tools
        it newly provides join if ``join_catalog`` (default: as when the source was added)."""
        _check_provider(provider)
        with self._lock:
            book = self._book
            book.sync()
            old = book.sources.get(name)
            if old is None:
                raise UnknownSourceError(f"no tool source named {name!r}; sources: "
                                         f"{_shown(book.sources)}")
            join = old.join_catalog if join_catalog is None else join_catalog
            source = LiveSource(provider, join)
            book.check_conflicts(name, source)
            known = book.source_state(name)
            book.sources[name] = source
            book.reindex()
            dropped = book.settle(name, known, join)
            self._view = book.commit()
            self._log.info("tool_source_replaced", source=name, tools=list(source.manifests),
                           dropped=list(dropped), generation=book.generation)

    def remove_source(self, name: str) -> None:
        """Remove source ``name``; its tools leave the catalog."""
        self._drop_source(name, orphan=False)

    def orphan_source(self, name: str) -> None:
        """Take source ``name`` out of the catalog but keep what it had as orphans (in
        ``state().orphans``), rebound as they were when a source of that name is added again:
        what a supervised source that gave up leaves behind."""
        self._drop_source(name, orphan=True)

    def _drop_source(self, name: str, *, orphan: bool) -> None:
        with self._lock:
            book = self._book
            book.sync()
            if name not in book.sources:
                raise UnknownSourceError(f"no tool source named {name!r}; sources: "
                                         f"{_shown(book.sources)}")
            if orphan:
                book.awaited[name] = book.source_state(name)
            del book.sources[name]
            book.reindex()
            self._view = book.commit()
            self._log.info("tool_source_orphaned" if orphan else "tool_source_removed",
                           source=name, generation=book.generation)

    def sources(self) -> tuple[str, ...]:
        """The names of the live sources, in the order they were added."""
        return tuple(self._current().state.sources)

    # -- membership ------------------------------------------------------------------------

    def add_member(self, name: str) -> bool:
        """Put tool ``name`` in the catalog; returns whether membership changed.

        ``UnknownToolError`` if no live source provides it, ``ValueError`` if it is internal.
        """
        with self._lock:
            book = self._book
            book.sync()
            owner = book.owners.get(name)
            if owner is None:
                raise UnknownToolError(self._unknown_message_locked(name))
            if book.sources[owner].manifests[name].internal:
                raise ValueError(f"tool {name!r} is internal: it is never offered to the model; "
                                 "the host runs it with execute_internal()")
            if name in book.members:
                return False
            book.members.add(name)
            self._view = book.commit()
            self._log.info("catalog_member_added", tool=name, generation=book.generation)
            return True

    def remove_member(self, name: str) -> bool:
        """Take tool ``name`` out of the catalog; returns whether membership changed."""
        with self._lock:
            book = self._book
            book.sync()
            if name not in book.members:
                return False
            book.members.discard(name)
            self._view = book.commit()
            self._log.info("catalog_member_removed", tool=name, generation=book.generation)
            return True

    def members(self, membership: Mapping[str, bool] | None = None) -> frozenset[str]:
        """The names in the catalog.

        Args:
            membership: One run's own edits over the catalog (tool name -> present), as
                ``ctx.sessions.set_tool_membership`` makes them: the catalog as that run sees
                it. A name no live source provides (or an internal one) is never a member.
        """
        return _members(self._current(), membership)

    def process_tools(self) -> list[str]:
        """The members whose handlers run in worker processes (``isolation='process'``):
        those a program needs ``if __name__ == "__main__":`` for. Worked out once per catalog
        view (every run's start asks), then read; the pair is replaced whole, never mutated."""
        view = self._current()
        seen, names = self._process_tools
        if seen is not view:
            names = tuple(name for name in view.members if isinstance(
                tool := self.resolve(name), Tool) and tool.isolation == "process")
            self._process_tools = (view, names)
        return list(names)

    # -- what the model sees ---------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Moves by one each time the tools on offer or the membership really change."""
        return self._current().state.generation

    def catalog(self) -> tuple[ToolManifest, ...]:
        """The members' manifests, in source order then each provider's order."""
        return self._current().catalog

    def specs(self, membership: Mapping[str, bool] | None = None) -> tuple[ToolSpec, ...]:
        """What the model is offered: the members' specs, in :meth:`catalog` order.

        Args:
            membership: One run's own edits over the catalog, as for :meth:`members`.
        """
        view = self._current()
        if not membership:
            return tuple(m.spec for m in view.catalog)
        members = _members(view, membership)
        return tuple(m.spec for m in view.manifests.values() if m.name in members)

    def available(self) -> tuple[ToolManifest, ...]:
        """Every tool the live sources provide (internal ones excepted), members or not, in
        source order: what ``set_tool_membership`` may put in the catalog."""
        view = self._current()
        return tuple(m for m in view.manifests.values() if not m.internal)

    def offered_tool(self, name: str) -> Tool | None:
        """The tool ``name`` a live source offers, member or not (``None`` if none does, or it
        is internal): what a run's own catalog edits may put in."""
        found = self.resolve(name, membership={name: True})
        return found if isinstance(found, Tool) else None

    def orphans(self) -> dict[str, tuple[str, ...]]:
        """Missing sources a restored snapshot waits for, with their member tools."""
        return {name: known.members for name, known in self._current().state.orphans.items()}

    # -- calls -----------------------------------------------------------------------------

    def resolve(self, name: str, ctx: CallContext | None = None, *,
                membership: Mapping[str, bool] | None = None) -> Tool | Err:
        """The tool a model call names, or ``Err(ToolError("not_found"))`` unless a member.

        Args:
            name: The tool's name.
            ctx: The call's context, named in the ``not_found`` error.
            membership: One run's own edits over the catalog, as for :meth:`members`: the
                gate of that run's calls.
        """
        ctx = ctx or CallContext()
        provider = self._admit(name, ctx, internal=False, membership=membership)
        if isinstance(provider, Err):
            return provider
        found = provider.resolve(name)
        return found if found is not None else tool_not_found(name, ctx, "the tool was removed")

    def prepare(self, name: str, arguments: Any, ctx: CallContext | None = None
                ) -> PreparedCall | Err:
        """A model call bound to its tool; ``Err(ToolError("not_found"))`` unless ``name`` is
        a member."""
        prepared = self._prepare(name, arguments, ctx or CallContext(), internal=False)
        return prepared if isinstance(prepared, Err) else prepared[1]

    def execute(self, name: str, arguments: Any, ctx: CallContext | None = None
                ) -> HandlerResult:
        """Run a model call in the calling thread if ``name`` is a member.

        A call that passed the gate runs to the end even if the tool leaves the catalog
        meanwhile: membership is checked once, when the call starts.
        """
        prepared = self._prepare(name, arguments, ctx or CallContext(), internal=False)
        if isinstance(prepared, Err):
            return prepared
        provider, call = prepared
        return provider.execute(call)

    def execute_internal(self, name: str, arguments: Any, ctx: CallContext | None = None
                         ) -> HandlerResult:
        """Run an internal tool for the host (never for the model)."""
        prepared = self._prepare(name, arguments, ctx or CallContext(), internal=True)
        if isinstance(prepared, Err):
            return prepared
        provider, call = prepared
        return provider.execute(call)

    def _admit(self, name: str, ctx: CallContext, *, internal: bool,
               membership: Mapping[str, bool] | None = None) -> ToolProvider | Err:
        """The gate: the provider of a member (or, for the host, of an internal tool)."""
        view = self._current()
        if internal:
            manifest = view.manifests.get(name)
            if manifest is None or not manifest.internal:
                return tool_not_found(name, ctx, f"no internal tool named {name!r}")
        elif not _is_member(view, name, membership):
            self._log.debug("tool_not_in_catalog", tool=name, tool_call_id=ctx.tool_call_id)
            return tool_not_found(name, ctx, f"tool {name!r} is not in the catalog; the tools "
                                             f"on offer are: "
                                             f"{_shown(_members(view, membership))}")
        return view.providers[view.owners[name]]

    def _prepare(self, name: str, arguments: Any, ctx: CallContext, *, internal: bool
                 ) -> tuple[ToolProvider, PreparedCall] | Err:
        provider = self._admit(name, ctx, internal=internal)
        if isinstance(provider, Err):
            return provider
        prepared = provider.prepare(name, arguments, ctx)
        return prepared if isinstance(prepared, Err) else (provider, prepared)

    # -- state -----------------------------------------------------------------------------

    def state(self) -> ToolState:
        """A JSON-serialisable snapshot of the catalog at the current generation."""
        return self._current().state

    def apply_state(self, state: ToolState) -> None:
        """Set the catalog to ``state``'s, if ``state`` was taken at the current generation.

        For edits made on a fresh ``state()``: a state from an older generation is refused with
        ``GenerationMismatchError``, so a concurrent change is never silently overwritten.
        """
        if not isinstance(state, ToolState):
            raise TypeError(f"apply_state takes a ToolState, got {type(state).__name__}")
        with self._lock:
            book = self._book
            book.sync()
            if state.generation != book.generation:
                raise GenerationMismatchError(book.generation, state.generation)
            if set(state.sources) != set(book.sources):
                raise ValueError(f"tool state lists sources {_shown(state.sources)} but the "
                                 f"registry has {_shown(book.sources)}")
            live_orphans = set(state.orphans) & set(book.sources)
            if live_orphans:
                raise ValueError(f"tool state lists live source(s) {_shown(live_orphans)} "
                                 "as orphans")
            members: set[str] = set()
            for name, known in state.sources.items():
                offered = set(book.offered(name))
                bad = set(known.members) - offered
                if bad:
                    raise ValueError(f"tool state puts {_shown(bad)} in the catalog but source "
                                     f"{name!r} offers no such tool (only {_shown(offered)})")
                members |= set(known.members)
            book.members = members
            book.awaited = dict(state.orphans)
            self._view = book.commit()
            self._log.info("tool_state_applied", generation=book.generation)

    def restore_state(self, snapshot: ToolState) -> RestoreReport:
        """Rebuild the catalog from ``snapshot`` over the live sources (any generation).

        A live source gets the members the snapshot gave it, where it still provides them
        (others are reported as dropped), plus new tools if it joins the catalog. A source
        the snapshot knew that is missing now keeps its members as orphans, outside the
        catalog, until it is added again. Live sources the snapshot did not know keep
        their current members.
        """
        if not isinstance(snapshot, ToolState):
            raise TypeError(f"restore_state takes a ToolState, got {type(snapshot).__name__}")
        both = set(snapshot.sources) & set(snapshot.orphans)
        if both:
            raise ValueError(f"tool state lists {_shown(both)} both as live and orphaned")
        known_all = {**snapshot.orphans, **snapshot.sources}
        with self._lock:
            book = self._book
            book.sync()
            dropped: dict[str, tuple[str, ...]] = {}
            for name, source in book.sources.items():
                if name in known_all:
                    lost = book.settle(name, known_all[name], source.join_catalog)
                    if lost:
                        dropped[name] = lost
            book.awaited = {name: known for name, known in known_all.items()
                            if name not in book.sources}
            self._view = book.commit()
            report = RestoreReport(
                members=tuple(sorted(book.members)),
                orphans={name: known.members for name, known in book.awaited.items()},
                dropped=dropped,
            )
            self._log.info("tool_state_restored", generation=book.generation,
                           orphans=report.orphans, dropped=dropped)
            return report

    # -- internals (callers hold _lock unless noted) ----------------------------------------

    def _current(self) -> View:
        """The current view, re-read first if a provider's version moved (lock-free otherwise)."""
        view = self._view
        for provider, seen in view.versions:
            if provider.version != seen:
                with self._lock:
                    self._book.sync()
                    self._view = self._book.commit()
                    return self._view
        return view

    def _unknown_message_locked(self, name: str) -> str:
        book = self._book
        for source, known in book.awaited.items():
            if name in known.tools:
                return (f"tool {name!r} belongs to source {source!r}, which is missing; "
                        "add the source back first")
        return f"no live source provides a tool named {name!r}; tools: {_shown(book.owners)}"

    def __repr__(self) -> str:
        view = self._view
        return (f"ToolRegistry(sources={list(view.providers)}, members={sorted(view.members)}, "
                f"generation={view.state.generation})")


def _is_member(view: View, name: str, membership: Mapping[str, bool] | None) -> bool:
    """Whether ``name`` is in the catalog of ``view`` as a run with ``membership`` sees it."""
    present = None if not membership else membership.get(name)
    if present is None:
        return name in view.members
    manifest = view.manifests.get(name)
    return present and manifest is not None and not manifest.internal


def _members(view: View, membership: Mapping[str, bool] | None) -> frozenset[str]:
    """The names in the catalog of ``view`` as a run with ``membership`` sees it."""
    if not membership:
        return view.members
    return frozenset(name for name in {*view.members, *membership}
                     if _is_member(view, name, membership))


def _check_provider(provider: object) -> None:
    if not isinstance(provider, ToolProvider):
        raise TypeError(f"a tool source must be a ToolProvider (version, manifests, resolve, "
                        f"prepare, execute), got {type(provider).__name__}")
