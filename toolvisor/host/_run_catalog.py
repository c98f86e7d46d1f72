"""``RunCatalog``: one run's own catalog, its edits over the agent's ``ToolRegistry``.

``ctx.sessions.set_tool_membership`` edits a run's ``RunCatalog``, never the registry: two
runs, a later run and a child session each see only their own edits, while agent-wide changes
(``agent.registry``) reach every run, but for the names a run set itself. The edits are the
run's ``TurnMachine`` state too: each call's go to the machine with its outcome, so they are in
the run's checkpoint, and a run hosted again (resumed, restored) starts from the checkpoint's.

Handler threads write ``_edits`` (under ``_lock``); the orchestrator's thread reads them (the
model request, each call's gate). The registry is read without locking, as always.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from toolvisor._logging import get_event_log
from toolvisor.contract import CallContext, CatalogEntry, Err, OutputWindow, Tool, ToolSpec
from toolvisor.registry import ToolRegistry, UnknownToolError

_log = get_event_log("registry")


class RunCatalog:
    """The catalog as run ``run_id`` sees it: ``registry`` with the run's own ``edits``
    (tool name -> present) over its membership."""

    def __init__(self, run_id: str, registry: ToolRegistry, edits: Mapping[str, bool]) -> None:
        self._run_id = run_id
        self._registry = registry
        self._lock = threading.Lock()
        self._edits = dict(edits)

    def edits(self) -> dict[str, bool]:
        """A copy of the run's own edits."""
        with self._lock:
            return dict(self._edits)

    def entries(self) -> tuple[CatalogEntry, ...]:
        """Every tool the sources provide, with whether it is in this run's catalog."""
        members = self._registry.members(self.edits())
        return tuple(CatalogEntry(spec=m.spec, present=m.name in members)
                     for m in self._registry.available())

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the run's model is offered: its catalog's specs, in the registry's order."""
        return self._registry.specs(self.edits())

    def resolve(self, name: str, ctx: CallContext | None = None) -> Tool | Err:
        """The gate of the run's calls: the tool, or ``not_found`` unless in its catalog."""
        return self._registry.resolve(name, ctx, membership=self.edits())

    def output_window(self, tool_name: str) -> OutputWindow:
        """Which end of a tool's text the output budget keeps (``head`` for a tool gone)."""
        tool = self.resolve(tool_name)
        return "head" if isinstance(tool, Err) else tool.output_window

    def set(self, names: Iterable[str], present: bool) -> frozenset[str]:
        """Put ``names`` in the run's catalog or take them out; returns the names whose
        membership changed. A name no live source offers cannot be put in
        (``UnknownToolError``); nothing changes then."""
        names = list(names)
        if present:
            offered = {m.name for m in self._registry.available()}
            unknown = [name for name in names if name not in offered]
            if unknown:
                raise UnknownToolError(
                    f"no live source offers a tool named {unknown[0]!r} (internal tools are "
                    f"never offered); tools: {', '.join(sorted(offered)[:50]) or '(none)'}")
        with self._lock:
            before = self._registry.members(self._edits)
            self._edits.update(dict.fromkeys(names, present))
            after = self._registry.members(self._edits)
        changed = frozenset(name for name in names if (name in before) != (name in after))
        _log.info("run_catalog_edited", run_id=self._run_id, tools=sorted(set(names)),
                  present=present, changed=sorted(changed))
        return changed
