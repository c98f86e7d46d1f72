"""A run's background processes in the run store: their lives as process events.

Each process has an ordered list of lifecycle events, recorded as the run's process events of
the call id ``process:<durable id>``: ``process_started`` (ordinal 0: the handle, what runs and
how, the host that runs it), any ``process_restarted`` (a host took over one that a dead host
was running), and last ``process_ended`` (its result as JSON). Each event's ordinal is the
count of those before it and the first record of an ordinal wins, so two hosts racing to
restart or end a process agree on who did. Nothing else is stored: listing a run's processes
reads its process events back. Plain functions over a ``RunStore``, safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolvisor.contract import Err, Ok, ProcessInfo, ProcessStatus, ToolError
from toolvisor.durable import _json
from toolvisor.durable._store import RunStore

LIFE_PREFIX = "process:"
"""The call id of a process's lifecycle events is this and the process's durable id."""

STARTED, RESTARTED, ENDED = "process_started", "process_restarted", "process_ended"


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """One process as the store knows it: its handle, durable id (its journal's call id),
    ``spec`` (what runs and how: JSON), the host that runs it (``holder``), its result as
    JSON once ended, and how many lifecycle events it has (the next one's ordinal)."""

    run_id: str
    handle: str
    durable_id: str
    spec: dict[str, Any]
    holder: str
    ended: dict[str, Any] | None
    events: int

    @property
    def status(self) -> ProcessStatus:
        """``running`` until it ended, then how it ended."""
        if self.ended is None:
            return "running"
        if "ok" in self.ended:
            return "ok"
        error = self.ended.get("tool_error")
        if isinstance(error, dict) and error.get("code") == "interrupted":
            return "interrupted"
        return "error"

    def info(self) -> ProcessInfo:
        """What ``list()`` reports of it."""
        return ProcessInfo(self.handle, str(self.spec.get("name", "")), self.status,
                           bool(self.spec.get("detached", False)))


def result_json(result: Ok | Err) -> dict[str, Any]:
    """A process's result as the store keeps it (the value must be JSON, checked on write)."""
    if isinstance(result, Ok):
        return {"ok": result.value}
    if isinstance(result.reason, ToolError):
        return {"tool_error": result.reason.to_dict()}
    return {"error": result.reason}


def result_of(data: dict[str, Any]) -> Ok | Err:
    """The result ``result_json`` stored, read back."""
    if "ok" in data:
        return Ok(data["ok"])
    if "tool_error" in data:
        return Err(ToolError.from_dict(data["tool_error"]))
    return Err(data["error"])


def process_records(store: RunStore, run_id: str) -> dict[str, ProcessRecord]:
    """Every process of the run, by handle, in the order they started."""
    found: dict[str, dict[str, Any]] = {}
    for event in store.process_events(run_id):
        if not event.call_id.startswith(LIFE_PREFIX):
            continue
        durable_id = event.call_id[len(LIFE_PREFIX):]
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type == STARTED:
            found[durable_id] = {"handle": payload["handle"], "spec": payload["spec"],
                                 "holder": payload["holder"], "ended": None, "events": 1}
            continue
        entry = found.get(durable_id)
        if entry is None:
            continue
        entry["events"] += 1
        if event.type == RESTARTED:
            entry["holder"] = payload["holder"]
        elif event.type == ENDED:
            entry["ended"] = payload["result"]
    return {entry["handle"]: ProcessRecord(run_id, entry["handle"], durable_id, entry["spec"],
                                           entry["holder"], entry["ended"], entry["events"])
            for durable_id, entry in found.items()}


def record_start(store: RunStore, run_id: str, *, handle: str, durable_id: str,
                 spec: dict[str, Any], holder: str) -> ProcessRecord:
    """Record that the process starts; if it was recorded already (the call that starts it
    runs again after a crash), the record as it stands."""
    store.append_process_event(run_id, LIFE_PREFIX + durable_id, 0, STARTED,
                               {"handle": handle, "spec": spec, "holder": holder})
    return process_records(store, run_id)[handle]


def record_restart(store: RunStore, record: ProcessRecord, holder: str) -> bool:
    """Record that ``holder`` runs the process again; whether it won (no other host did)."""
    return _append(store, record, RESTARTED, {"holder": holder})


def record_end(store: RunStore, record: ProcessRecord, result: dict[str, Any]) -> bool:
    """Record the process's end with ``result`` (``result_json``); whether it won (its end
    was not recorded first by another host)."""
    return _append(store, record, ENDED, {"result": result})


def _append(store: RunStore, record: ProcessRecord, type: str,
            payload: dict[str, Any]) -> bool:
    payload = _json.loads(_json.dumps(payload, f"a process's {type} event"))  # as read back
    written = store.append_process_event(record.run_id, LIFE_PREFIX + record.durable_id,
                                         record.events, type, payload)
    return written.type == type and written.payload == payload
