"""Older checkpoints, as the current version reads them (plain JSON data in, JSON data out).

Version 2 reads as 3 unchanged: every field 3 added has a default. Up to version 3 a tool
call's retry waited in a ``Sleep`` effect of the whole step (``call_ids``, ``reason``
``tool_retry``); from version 4 each retry is a call of a ``ToolCalls`` effect with its own
``backoff``. So a run that was sleeping before a retry reads as that ``ToolCalls`` effect, with
the sleep's id: each retry's backoff counts from when the sleep was emitted, so a host waits
only what is left of it, and the run goes on exactly where it was.
"""

from __future__ import annotations

from typing import Any


def upgrade(data: dict[str, Any], version: int) -> dict[str, Any]:
    """``data`` (a checkpoint of ``version``) in the current shape; the caller validates it."""
    run = data.get("run")
    if version >= 4 or not isinstance(run, dict):
        return data
    sleep = run.get("outstanding")
    if not isinstance(sleep, dict) or sleep.get("kind") != "sleep":
        return data
    run = dict(run)
    if sleep.get("reason", "tool_retry") == "model_retry":
        run["outstanding"] = {k: v for k, v in sleep.items() if k != "call_ids"}
    else:
        try:
            run.update(_retries_of(run, sleep))
        except (AttributeError, IndexError, KeyError, TypeError):  # malformed: validation says how
            return data
    return {**data, "run": run}


def _retries_of(run: dict[str, Any], sleep: dict[str, Any]) -> dict[str, Any]:
    """The sleeping run's waiting retries as the ``ToolCalls`` effect that runs them."""
    calls, records = [], []
    steps = run.get("steps") or []
    for record in run.get("calls") or []:
        if not isinstance(record, dict) or record.get("status") != "retry_wait":
            records.append(record)
            continue
        attempt = record.get("attempt", 1) + 1
        step = record.get("step", -1)
        snapshot = steps[step]["snapshot"] if 0 <= step < len(steps) else None
        calls.append({"call": record.get("call"), "turn": run.get("turns", 0),
                      "attempt": attempt, "state": snapshot or {},
                      "backoff": {"seconds": record.get("retry_delay") or 0.0,
                                  "since": sleep.get("id")}})
        records.append({**record, "status": "running", "attempt": attempt, "retry_delay": None})
    return {"phase": "awaiting_tools", "calls": records,
            "outstanding": {"kind": "tool_calls", "id": sleep.get("id"), "calls": calls}}
