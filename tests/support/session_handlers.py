"""Module-level handlers that use ``ctx.sessions`` from a worker process or a Ray task
(importable by name there)."""

from __future__ import annotations

import os
from typing import Any

from toolvisor import CallContext, Ok


def inspects(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Reads the run's model, snapshot and catalog, admits a tool, and runs one child turn
    on the calling agent, all over the context link."""
    sessions = ctx.sessions
    assert sessions is not None
    snapshot = sessions.snapshot_current()
    changed = sessions.set_tool_membership(["extra"], True)
    child = sessions.start_turn("child prompt")
    return Ok({
        "model": sessions.model().name,
        "status": snapshot.status,
        "prompt": snapshot.messages[0].content,  # type: ignore[union-attr]
        "changed": sorted(changed),
        "present": sorted(e.name for e in sessions.tool_catalog() if e.present),
        "child": child.text,
        "child_parent": sessions.snapshot(child.run_id).parent_run_id,
        "pid": os.getpid(),
    })
