"""``DurableWaits``: the durable side of the runs an orchestrator hosts.

It gives each call of a durable run its completion-key issuer, durable effects and cancel token;
parks the keys of ``Pending`` calls (issued once per suspension) and starts one ``KeyWaiter``
per open wait; turns resolutions into the results the machine resumes with; revokes the keys
that calls took but did not use; and calls the tools' ``on_cancel`` hooks when a run is
cancelled. It keeps, by run id, each run's key waiters, its parked calls and whether it waits
on them, until the run leaves the host (:meth:`DurableWaits.forget`). It never steps a machine:
the orchestrator does, with what this returns. Every method runs on the orchestrator's thread,
which owns that state.
"""

from __future__ import annotations

import functools
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolvisor._logging import get_event_log
from toolvisor.contract import (
    CapabilityError,
    Err,
    HandlerResult,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolError,
)
from toolvisor.durable import (
    CompletionKeyIssuer,
    DurableEffects,
    Resolution,
    RunStore,
    Wait,
)
from toolvisor.host._hosted_run import HostedRun
from toolvisor.host._protocol import KeyResolved
from toolvisor.host.waits._key_waiter import KeyWaiter
from toolvisor.machine import CallOutcome, CallToRun, Done, PendingCall, Suspended
from toolvisor.registry import ToolRegistry

PENDING_TIMEOUT_CODE = "pending_deadline_exceeded"
"""The ``ToolError`` code a ``Pending`` call gets when its deadline passes unresolved."""



@dataclass(frozen=True, slots=True)
class ParkedCall:
    """A ``Pending`` call of the current suspension and the completion key it waits on."""

    call: ToolCall
    pending: PendingCall
    key: str


Ready = dict[str, tuple[ParkedCall, Resolution]]
"""The resolved waits of a suspension, by call id."""


class KeyRelays(Protocol):
    """The relays of the children whose keys a run's calls wait on (the agent's child
    sessions): followed when a run waits on its keys, shown in its ``Suspended``, cancelled with
    the run."""

    def follow_key_relays(self, run_id: str, waiting: dict[str, tuple[str, str]]) -> None:
        """Follow the children the run's ``waiting`` calls (``call id -> (durable id, key)``)
        relay."""

    def shown_keys(self, run_id: str, keys: dict[str, str]) -> dict[str, str]:
        """The keys the run shows, by call id (a relaying call's: its child's)."""

    def cancel_relayed(self, run_id: str, waiting: dict[str, str]) -> None:
        """Cancel the children the run's ``waiting`` calls (``call id -> durable id``) relay."""


@dataclass(eq=False, slots=True)
class _RunWaits:
    """What ``DurableWaits`` keeps of one hosted run."""

    waiters: dict[str, KeyWaiter] = field(default_factory=dict)  # by key
    suspended: bool = False  # the machine's last step ended in the suspension it waits on
    failing: str | None = None  # fail_turn: the run's next waiting effect fails with this
    parked: tuple[int, dict[str, ParkedCall]] | None = None  # (Done effect id, its pending
    # calls by key): the keys of one suspension never change, so they are issued once


def durable_call_id(turn: int, attempt: int, call_id: str) -> str:
    """The id a call's keys and journal are filed under: unique within a run even when a
    model reuses call ids across turns, and the same when a restored run re-runs the call."""
    return f"{turn}.{attempt}.{call_id}"


class DurableWaits:
    """Completion keys, waits and cancel hooks for the durable runs of one orchestrator.

    ``tell`` delivers a message to the orchestrator from a key waiter's thread.
    """

    def __init__(self, store: RunStore, registry: ToolRegistry, poll_interval: float,
                 tell: Callable[[Any], None], fence: Callable[[str], int | None], *,
                 sessions: KeyRelays | None = None) -> None:
        self._store = store
        self._fence = fence
        self._sessions = sessions  # a call relaying its child's key shows the child's
        self._registry = registry
        self._poll_interval = poll_interval
        self._tell = tell
        self._runs: dict[str, _RunWaits] = {}
        self._log = get_event_log("orchestrator")

    def capabilities(self, run_id: str, planned: CallToRun
                     ) -> tuple[threading.Event, CompletionKeyIssuer, DurableEffects]:
        """A call's cancel token, key issuer and durable effects."""
        token = threading.Event()
        durable_id = durable_call_id(planned.turn, planned.attempt, planned.call.id)
        return (token, CompletionKeyIssuer(self._store, run_id, durable_id),
                DurableEffects(self._store, run_id, durable_id, cancelled=token,
                               fence=self._fence(run_id)))

    def stepped(self, run_id: str) -> None:
        """The run's machine stepped: it no longer waits on the suspension it waited on."""
        run = self._runs.get(run_id)
        if run is not None:
            run.suspended = False

    def failing(self, run_id: str) -> str | None:
        """Why the run's next waiting effect is to fail (a ``fail_turn`` timeout), if it is."""
        run = self._runs.get(run_id)
        return None if run is None else run.failing

    def stop_work(self, run_id: str) -> None:
        """Stop and join the run's key waiters (its waits stay in the store)."""
        run = self._runs.get(run_id)
        if run is not None:
            _stop(run.waiters)

    def forget(self, run_id: str) -> None:
        """The run left the host: stop its work and drop what was kept of it."""
        self.stop_work(run_id)
        self._runs.pop(run_id, None)

    def waited(self, run_id: str, effect_id: int) -> float:
        """Seconds since effect ``effect_id`` of the run was emitted, on the store's clock: its
        checkpoint was saved then, before anything performed it (``0`` if there is none)."""
        saved = self._store.checkpoint_at(run_id, effect_id)
        return 0.0 if saved is None else max(0.0, self._store.now() - saved.saved_at)

    def may_run_again(self, run_id: str, tool: Tool, planned: CallToRun) -> bool:
        """At most once across a crash: a call a restored run finds unfinished may have run
        already, so it runs again only if its tool is ``retryable`` or it journaled its steps
        (``run_json`` replays them instead of repeating them)."""
        if tool.retryable:
            return True
        durable_id = durable_call_id(planned.turn, planned.attempt, planned.call.id)
        return self._store.journaled(run_id, durable_id)

    def settle_key(self, run_id: str, outcome: CallOutcome, key: str | None) -> None:
        """A call that took a key: park it if the call is ``Pending``, else revoke it."""
        if key is None:
            return
        if isinstance(outcome.result, Pending):
            self._park(key, outcome.result)
        elif self._store.revoke(key, fence=self._fence(run_id)):
            self._log.info("completion_key_revoked", run_id=run_id, call_id=outcome.call_id)

    def wait(self, run: HostedRun, outcome: Suspended) -> Ready:
        """Park every key of the suspension; return the waits already resolved, and start a
        waiter for each of the others."""
        waits = self._of(run.run_id)
        waits.suspended = True
        ready: Ready = {}
        followed: dict[str, tuple[str, str]] = {}  # the calls that may relay a child's key
        for key, entry in self.parked(run).items():
            wait = self._park(key, entry.pending)
            resolution = wait.resolution
            if resolution is None and wait.deadline_at is not None:
                now = self._store.now()
                if now >= wait.deadline_at:  # overdue while no process hosted the run
                    resolution = self._store.expire(key, now, fence=self._fence(run.run_id))
            if resolution is not None:
                ready[entry.call.id] = (entry, resolution)
                continue
            followed[entry.call.id] = (wait.call_id, key)
            if key not in waits.waiters:
                waits.waiters[key] = KeyWaiter(
                    self._store, wait, self._fence(run.run_id), self._poll_interval,
                    functools.partial(self._tell, KeyResolved(run.run_id, key)))
        if self._sessions is not None and followed:
            self._relaying(run.run_id, self._sessions.follow_key_relays, followed)
        return ready

    def waiting_keys(self, run: HostedRun) -> dict[str, str]:
        """The keys the run waits on, by call id (a relaying call's: its child's key)."""
        keys = {entry.call.id: key for key, entry in self.parked(run).items()}
        return keys if self._sessions is None else \
            self._sessions.shown_keys(run.run_id, keys)

    def own_keys(self, run: HostedRun) -> list[str] | None:
        """The keys a suspended run waits on, its own (not the children's keys it shows):
        those it is handed back on; ``None`` if it is not suspended."""
        return None if run.machine.status != "suspended" else list(self.parked(run))

    def key_resolved(self, run: HostedRun, key: str) -> Suspended | None:
        """Join the key's waiter; the suspension to look at again, if the run still waits."""
        waits = self._of(run.run_id)
        waiter = waits.waiters.pop(key, None)
        if waiter is not None:
            waiter.join()  # it has told us; its thread is ending
        done = run.machine.outstanding
        if waits.suspended and isinstance(done, Done) and isinstance(done.outcome, Suspended):
            return done.outcome
        return None

    def answers(self, run: HostedRun, outcome: Suspended,
                ready: Ready) -> dict[str, HandlerResult] | None:
        """The results to resume the machine with; ``None`` when a wait was cancelled from
        elsewhere (another process), after calling the cancel hooks it asked for: the run
        is to be cancelled."""
        waits = self._of(run.run_id)
        answers: dict[str, HandlerResult] = {}
        for call_id, (entry, resolution) in ready.items():
            if resolution.kind == "cancelled":
                self.cancel_external_work(run, {
                    e.key for e, r in ready.values()
                    if r.kind == "cancelled" and e.pending.on_cancel == "cancel_external_work"})
                return None
            answers[call_id] = _result_of(entry, resolution)
            if resolution.kind == "timeout" and entry.pending.on_timeout == "fail_turn":
                waits.failing = (f"tool call {call_id!r} ({entry.call.name}) was not resolved "
                               f"before its deadline (on_timeout='fail_turn')")
        if waits.failing is not None:
            for call_id in outcome.call_ids:  # the turn is over: nothing else is awaited
                answers.setdefault(call_id, Err(ToolError(
                    "handler_exit", f"tool error: handler_exit: {waits.failing}",
                    tool_call_id=call_id, code="turn_failed")))
            keys = list(waits.waiters)
            _stop(waits.waiters)
            for key in keys:
                self._store.revoke(key, fence=self._fence(run.run_id))
        self._log.info("keys_delivered", run_id=run.run_id, call_ids=sorted(ready))
        return answers

    def cancel(self, run: HostedRun) -> None:
        """Resolve the run's waits as cancelled and call the cancel hooks they asked for."""
        cancelled = self._store.cancel_run(run.run_id)
        self.cancel_external_work(run, {w.key for w in cancelled if w.needs_external_cancel})
        if self._sessions is not None:  # and the children its calls relay
            self._relaying(run.run_id, self._sessions.cancel_relayed, {
                call_id: durable_call_id(*waiting, call_id)
                for call_id, waiting in run.machine.waiting_calls().items()})

    def _relaying(self, run_id: str, act: Callable[[str, Any], None], calls: Any) -> None:
        """Follow or cancel the children the run's calls relay; one that cannot be reached
        (its agent not found, the journal not matching) is logged, never the host's failure."""
        try:
            act(run_id, calls)
        except CapabilityError as exc:
            self._log.warning("child_relay_unreachable", run_id=run_id, error=str(exc))

    def cancel_external_work(self, run: HostedRun, keys: set[str]) -> None:
        """Call the tool's cancel hook for each cancelled key whose wait asked for it."""
        for key, entry in self.parked(run).items():
            if key not in keys:
                continue
            tool = self._registry.offered_tool(entry.call.name)  # member or not: a run's own
            hook = None if tool is None else tool.on_cancel  # catalog may have put it in
            if hook is None:
                self._log.warning("cancel_hook_missing", tool=entry.call.name,
                                  call_id=entry.call.id)
                continue
            try:
                hook(entry.call, key)
            except Exception as exc:
                self._log.error("cancel_hook_failed", tool=entry.call.name,
                                call_id=entry.call.id, error=f"{type(exc).__name__}: {exc}",
                                traceback="".join(traceback.format_exception(exc)))
            else:
                self._log.info("external_work_cancelled", tool=entry.call.name,
                               call_id=entry.call.id)

    def parked(self, run: HostedRun) -> dict[str, ParkedCall]:
        """The pending calls of the run's current suspension by key, their keys issued (once
        per suspension, written to the store); none if the run is not suspended."""
        done = run.machine.outstanding
        if not isinstance(done, Done) or not isinstance(done.outcome, Suspended):
            return {}
        waits = self._of(run.run_id)
        if waits.parked is not None and waits.parked[0] == done.id:
            return waits.parked[1]
        parked: dict[str, ParkedCall] = {}
        for pending in done.outcome.pending:
            key = self._store.issue_key(run.run_id, durable_call_id(
                pending.turn, pending.attempt, pending.call_id))
            parked[key] = ParkedCall(run.machine.tool_call(pending.call_id), pending, key)
        waits.parked = (done.id, parked)
        return parked

    def _of(self, run_id: str) -> _RunWaits:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _RunWaits()
        return run

    def _park(self, key: str, pending: Pending | PendingCall) -> Wait:
        """Record the wait (the first park wins: a restart does not move the deadline)."""
        deadline_at = None if pending.deadline is None else self._store.now() + pending.deadline
        return self._store.park(key, deadline_at=deadline_at, on_timeout=pending.on_timeout,
                                on_cancel=pending.on_cancel)


def _stop(waiters: dict[str, KeyWaiter]) -> None:
    """Stop and join ``waiters``, and forget them."""
    for waiter in waiters.values():
        waiter.stop()
    for waiter in waiters.values():
        waiter.join()
    waiters.clear()


def interrupted_error(call: ToolCall) -> ToolError:
    """What an unfinished call of a non-retryable, unjournaled tool gets once its run is
    restored: its host stopped before it ended (closed, Ctrl-C, SIGTERM, or killed: the store
    does not say which, so neither does the model's text)."""
    return ToolError(
        "handler_exit",
        f"tool error ({call.name}): handler_exit: the call stopped with the process hosting the "
        "run (closed, stopped by Ctrl-C or SIGTERM, or killed) before it ended, and is not run "
        "again (at most once: the tool is not retryable and journaled no steps)",
        tool_name=call.name, tool_call_id=call.id, cause="interrupted", code="interrupted")


def _result_of(entry: ParkedCall, resolution: Resolution) -> HandlerResult:
    call = entry.call
    if resolution.kind == "ok":
        return Ok(resolution.value)
    if resolution.kind == "error":
        return Err(resolution.value)
    return Err(ToolError(
        "timeout",
        f"tool error ({call.name}): timeout: the call's completion key was not resolved "
        f"within its deadline of {entry.pending.deadline} s",
        tool_name=call.name, tool_call_id=call.id, cause=entry.pending.deadline,
        code=PENDING_TIMEOUT_CODE))
