"""Restoring a run the store knows: its lease taken, its machine from its latest checkpoint."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from toolvisor.durable import RunStore, SavedCheckpoint, UnknownRunError
from toolvisor.host._hosted_run import HostedRun, hosted
from toolvisor.host.run._leases import RunLeases
from toolvisor.machine import MachineConfig, TurnMachine
from toolvisor.registry import ToolRegistry


def restore(store: RunStore | None, config: MachineConfig | None,
            leases: RunLeases | None, run_id: str) -> tuple[TurnMachine, SavedCheckpoint]:
    """Take the run's lease and restore its machine from the latest checkpoint (and that
    checkpoint); whatever refuses (no store, no such run, another host's lease, nothing saved
    yet, a checkpoint the store did not sign) raises, with the lease given back. Called on the
    orchestrator's thread, which owns ``leases``."""
    try:
        if store is None or config is None:
            raise LookupError(f"run {run_id!r} is not running here and there is no session "
                              "store to restore it from; give the agent a store")
        if store.get_run(run_id) is None:
            raise UnknownRunError(f"the run store has no run {run_id!r}")
        if leases is not None:
            leases.take(run_id)
        saved = store.latest_checkpoint(run_id)
        if saved is None:
            raise LookupError(f"run {run_id!r} stopped before its first checkpoint, before "
                              "any effect was performed; start it again")
        return TurnMachine.restore(config, saved.data), saved
    except Exception:
        if leases is not None:
            leases.give_up(run_id)
        raise


def rehosted(store: RunStore | None, config: MachineConfig | None,
             leases: RunLeases | None, run_id: str, reply: Future[Any], *,
             registry: ToolRegistry) -> HostedRun | None:
    """The run restored (``restore``) to be hosted, ``reply`` its watcher, the effect it
    re-emits noted and its catalog the agent's ``registry`` with its checkpoint's edits;
    ``None`` if it cannot be (``reply`` is failed with why)."""
    try:
        machine, _ = restore(store, config, leases, run_id)
    except Exception as exc:
        reply.set_exception(exc)
        return None
    outstanding = machine.outstanding
    return hosted(run_id, machine, reply, registry,
                  None if outstanding is None else outstanding.id)
