"""``Processes``: the background processes of an agent's runs (``ctx.processes``).

A process is a handler run as a call is run (its own ``ToolCallActor``, the same isolation
backends and timeouts), but with no model waiting for it. Each run's processes live under a
``DynamicSupervisor`` of their own (``processes:<run id>``), started on the run's first
process under the tree's ``processes`` supervisor. A run that ends cancels its processes but
the detached ones; its supervisor stops once none is left.

With a run store every process's life is in the store (``durable``'s process log): its
start (the n-th process a call execution starts is the same process however often the call
runs), a restart, its end with its result. So a handle outlives this host, an output is read
back and never recomputed, and a process whose host died is run again only if it may run twice
(its function is ``retryable``, or it journaled a step), else it ends ``interrupted``: the
at-most-once rule of tool calls. Recovery is done where a process is looked up (``wait``,
``list``, ``cancel``) and when a restored run is hosted again.

State: the table of processes this host runs or ran (by handle) and each run's supervisor,
under one lock: handlers' threads start, wait for and cancel processes, the call actors'
threads end them, the orchestrator's thread ends runs, the agent's callers look. Nothing slow
(a supervisor's start, a store write) happens under the lock.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor.actors import CallReply, ToolCallDispatcher
from toolvisor.contract import (
    CallContext,
    CancelToken,
    Err,
    Ok,
    ProcessError,
    ProcessInfo,
    ProcessStatus,
    Tool,
    ToolCall,
    ToolError,
    check_seconds,
)
from toolvisor.durable import (
    DurableEffects,
    ProcessRecord,
    RunStore,
    holder_gone,
    new_holder,
    process_records,
    record_end,
    record_restart,
    record_start,
    result_json,
    result_of,
)
from toolvisor.host.processes._process_functions import tool_of
from toolvisor.supervisors import ChildSpec, DynamicSupervisor, DynamicSupervisorRef, SupervisorRef


@dataclass(eq=False, slots=True)
class _Live:
    """A process this host runs (or ran): its end is ``result`` once ``done`` is set."""

    run_id: str
    handle: str
    name: str
    detached: bool
    record: ProcessRecord | None  # with a store: its record, as this host last wrote it
    done: threading.Event = field(default_factory=threading.Event)
    result: Ok | Err | None = None
    actor: ActorRef[Any] | None = None
    cancelled: bool = False  # a cancel came before its actor was known

    def info(self) -> ProcessInfo:
        result = self.result
        status: ProcessStatus = "running" if result is None else "ok" if isinstance(
            result, Ok) else "interrupted" if _code(result) == "interrupted" else "error"
        return ProcessInfo(self.handle, self.name, status, self.detached)


@dataclass(slots=True)
class _Run:
    """One run's side: its processes' supervisor, and whether the run has ended."""

    supervisor: DynamicSupervisorRef | None = None
    ended: bool = False


class Processes:
    """Every background process of one agent's runs: each run's supervisor is a child of
    ``parent()`` (the tree's ``processes`` supervisor, as it is now), each process a call
    ``dispatcher`` starts under it. A process's progress reports go to ``progress``, as a
    call's do (the live view shows the process under the turn whose call started it)."""

    def __init__(self, store: RunStore | None, parent: Callable[[], SupervisorRef],
                 dispatcher: ToolCallDispatcher,
                 progress: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.holder = new_holder()  # names this host in the process log
        self.store = store
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()  # one run supervisor started at a time
        self._recover_lock = threading.Lock()  # one recovery at a time in this host
        self._live: dict[str, _Live] = {}
        self._runs: dict[str, _Run] = {}  # the runs with a process supervisor
        self._incarnations = itertools.count(1)  # a run's supervisor's child id is unique
        self._parent = parent
        self._dispatcher = dispatcher
        self._progress = progress  # (run id, tool_progress data): to the run's on_progress
        self._log = get_event_log("processes")

    # --- starting ---------------------------------------------------------------------------

    def start(self, run_id: str, caller: str, ordinal: int, fn: Callable[..., Any] | str,
              arguments: Mapping[str, Any], *, isolation: str | None, detached: bool,
              timeout: float | None, retryable: bool, options: Mapping[str, Any] | None,
              turn: int | None = None) -> str:
        """Start the ``ordinal``-th process of call execution ``caller`` (its durable id) and
        return its handle; a call run again after a crash gets the same process back."""
        if not isinstance(detached, bool):
            raise TypeError(f"detached must be a bool, got {detached!r}")
        ref, tool = tool_of(fn, isolation=isolation, timeout=timeout, retryable=retryable,
                             options=options)
        if not isinstance(arguments, Mapping):
            raise TypeError("a process's arguments are a dict (what its function gets as "
                            f"its arguments), got {type(arguments).__name__}")
        durable_id = f"{caller}/p{ordinal}"
        handle = f"{run_id}/{durable_id}"
        record = None
        if self.store is not None:
            spec = _json_spec({"fn": ref, "name": tool.name, "arguments": dict(arguments),
                               "isolation": isolation, "timeout": timeout,
                               "retryable": tool.retryable,
                               "options": None if options is None else dict(options),
                               "detached": detached, "turn": turn})
            record = record_start(self.store, run_id, handle=handle, durable_id=durable_id,
                                  spec=spec, holder=self.holder)
            if record.spec != spec:
                raise ProcessError("process_replay_mismatch", (
                    f"this call started process {handle} as {record.spec} and now, run again, "
                    f"starts {spec} in its place; a call run again starts the same processes "
                    "in the same order"))
            with self._lock:
                here = handle in self._live
            if record.holder != self.holder or record.events > 1 or here:
                self._recover(record)  # started before this execution of the call
                return handle
        self._launch(run_id, handle, durable_id=durable_id, tool=tool,
                     arguments=dict(arguments), detached=detached, record=record, turn=turn)
        return handle

    def _launch(self, run_id: str, handle: str, *, durable_id: str, tool: Tool,
                arguments: dict[str, Any], detached: bool, record: ProcessRecord | None,
                turn: int | None) -> None:
        dispatcher = self._dispatcher
        live = _Live(run_id, handle, tool.name, detached, record)
        with self._lock:
            self._live[handle] = live
        token = threading.Event()
        ctx = CallContext(
            session_id=run_id, request_id=handle,
            tool_call=ToolCall(id=durable_id, name=tool.name, arguments=arguments),
            cancelled=token, turn=turn,
            progress=None if self._progress is None else _ProcessProgress(
                self._progress, run_id, {"turn": turn, "tool_name": tool.name,
                                         "tool_call_id": durable_id, "attempt": 1,
                                         "process": handle}),
            durable=None if self.store is None else DurableEffects(
                self.store, run_id, durable_id, cancelled=token))
        self._log.info("process_started", run_id=run_id, handle=handle, tool_name=tool.name,
                       isolation=tool.isolation, detached=detached)
        call = ctx.tool_call
        assert call is not None
        try:
            supervisor = self._supervisor(run_id)
        except Exception as exc:  # the tree is stopping: the process ends before it started
            self._ended(live, token, CallReply(call.id, tool.name, Err(ToolError(
                "handler_exit", f"process {handle} could not be started: its run's "
                f"supervisor did not start: {type(exc).__name__}: {exc}", tool_name=tool.name,
                tool_call_id=call.id, cause=repr(exc), code="not_started")), ""))
            return
        actor = dispatcher.start_call(tool, call, ctx, lambda reply: self._ended(live, token,
                                                                                  reply),
                                      supervisor=supervisor)
        with self._lock:
            live.actor = actor
            stop = live.cancelled and actor is not None
        if stop and actor is not None:
            _stop(actor)

    def _supervisor(self, run_id: str) -> DynamicSupervisorRef:
        """The run's process supervisor, started on its first process."""
        with self._start_lock:
            with self._lock:
                run = self._runs.setdefault(run_id, _Run())
                if run.supervisor is not None and run.supervisor.is_alive():
                    return run.supervisor
            parent = self._parent()
            started: list[DynamicSupervisorRef] = []

            def start() -> DynamicSupervisorRef:
                started.append(DynamicSupervisor.start(name=f"processes:{run_id}"))
                return started[0]

            parent.start_child(ChildSpec(("processes", run_id, next(self._incarnations)), start,
                                         restart="temporary", type="supervisor"))
            with self._lock:
                run.supervisor = started[0]
            return started[0]

    def _ended(self, live: _Live, token: threading.Event, reply: CallReply) -> None:
        """A process's actor replied: record its end (first), then let its waiters go."""
        token.set()
        result = _process_result(live, reply)
        recorded = False
        try:
            if self.store is not None and live.record is not None:
                result = self._record_end(live.record, result)
                recorded = True
        except Exception as exc:  # the store failed: the waiters here still get the result
            self._log.error("process_end_not_recorded", run_id=live.run_id, handle=live.handle,
                            error=f"{type(exc).__name__}: {exc}")
        with self._lock:
            live.result = result
            live.actor = None
            if recorded:  # the store has it now: a later look reads it there
                self._live.pop(live.handle, None)
            run = self._runs.get(live.run_id)
            idle = run is not None and run.ended and not self._running(live.run_id)
            supervisor = None if run is None or not idle else run.supervisor
            if idle:
                del self._runs[live.run_id]
        live.done.set()
        self._log.info("process_ended", run_id=live.run_id, handle=live.handle,
                       status=live.info().status)
        if supervisor is not None:
            supervisor.stop(block=False)  # not waited for: this is one of its children

    def _record_end(self, record: ProcessRecord, result: Ok | Err) -> Ok | Err:
        """Record ``result`` as the process's end; the end as recorded (read back from JSON:
        another host may have recorded it first)."""
        assert self.store is not None
        try:
            data = result_json(result)
            record_end(self.store, record, data)
        except TypeError as exc:
            data = result_json(Err(ToolError(
                "encoding_failed", f"process {record.handle}: its result is not JSON, which a "
                f"run with a run store keeps: {exc}", tool_name=str(record.spec["name"]),
                tool_call_id=record.durable_id, cause=repr(exc))))
            record_end(self.store, record, data)
        ended = process_records(self.store, record.run_id)[record.handle].ended
        return result_of(ended if ended is not None else data)

    # --- runs -------------------------------------------------------------------------------

    def run_ended(self, run_id: str) -> None:
        """The run ended (completed, halted, failed, cancelled): cancel its processes but the
        detached ones; its supervisor stops once none is left."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:  # it started no process (or they all ended after it)
                return
            run.ended = True
            stopping = [live for live in self._live.values() if live.run_id == run_id
                        and live.result is None and not live.detached]
            for live in stopping:
                live.cancelled = True
            left = any(live.run_id == run_id and live.result is None and live.detached
                       for live in self._live.values())
            supervisor = None if left else run.supervisor
            if not left:
                del self._runs[run_id]
        for live in stopping:
            self._log.info("process_cancelled", run_id=run_id, handle=live.handle,
                           why="run_ended")
            if live.actor is not None:
                _stop(live.actor)
        if supervisor is not None:
            supervisor.stop(block=False)

    def recover(self, run_id: str) -> None:
        """A restored run is hosted here: its processes whose host died are run again or
        reported interrupted (at most once)."""
        if self.store is not None:
            for record in process_records(self.store, run_id).values():
                self._recover(record)

    def _running(self, run_id: str) -> bool:
        return any(live.run_id == run_id and live.result is None
                   for live in self._live.values())

    # --- recovery ---------------------------------------------------------------------------

    def _recover(self, record: ProcessRecord) -> None:
        """A process this host does not run: if its host died before its end, run it again
        (``retryable``, or it journaled a step) or end it ``interrupted``."""
        store = self.store
        if store is None or record.ended is not None or holder_gone(record.holder) is False:
            return
        with self._recover_lock:
            with self._lock:
                if record.handle in self._live:
                    return
            record = process_records(store, record.run_id)[record.handle]  # as it stands now
            if record.ended is not None or not holder_gone(record.holder):
                return
            run_again = record.spec.get("fn") is not None and (
                bool(record.spec.get("retryable"))
                or store.journaled(record.run_id, record.durable_id))
            if not run_again:
                self._log.info("process_interrupted", run_id=record.run_id,
                               handle=record.handle)
                record_end(store, record, result_json(Err(_interrupted(record))))
                return
            if not record_restart(store, record, self.holder):
                return  # another host took it over first
            record = process_records(store, record.run_id)[record.handle]
            self._log.info("process_restarted", run_id=record.run_id, handle=record.handle)
            spec = record.spec
            try:
                _, tool = tool_of(spec["fn"], isolation=spec["isolation"],
                                   timeout=spec["timeout"], retryable=spec["retryable"],
                                   options=spec["options"])
            except Exception as exc:
                record_end(store, record, result_json(Err(ToolError(
                    "handler_exit", f"process {record.handle} could not be started again: "
                    f"{type(exc).__name__}: {exc}", tool_name=str(spec["name"]),
                    tool_call_id=record.durable_id, cause=repr(exc), code="not_started"))))
                return
            self._launch(record.run_id, record.handle, durable_id=record.durable_id, tool=tool,
                         arguments=dict(spec["arguments"]), detached=bool(spec["detached"]),
                         record=record, turn=spec.get("turn"))

    # --- looking -----------------------------------------------------------------------------

    def find(self, run_id: str, handle: Any) -> _Live | ProcessRecord:
        """The process ``handle`` names in run ``run_id``: the one this host runs, else its
        record (recovered first if its host died); ``ProcessError`` if there is none."""
        if not isinstance(handle, str):
            raise ProcessError("process_unknown_handle", (
                f"a process handle is the str ctx.processes.start returned, got {handle!r}"))
        if not handle.startswith(run_id + "/"):
            raise ProcessError("process_other_run", (
                f"process {handle!r} is not a process of run {run_id!r}: a run sees only the "
                "processes its own calls started; ask the agent for the other run's "
                "(agent.processes(run_id))"))
        with self._lock:
            live = self._live.get(handle)
        if live is not None:
            return live
        record = None if self.store is None else process_records(self.store, run_id).get(handle)
        if record is None:
            raise ProcessError("process_unknown_handle", (
                f"run {run_id!r} has no process {handle!r}" + (
                    "" if self.store is not None else
                    " in this agent (without a run store, processes are known only to "
                    "the agent that started them)")))
        self._recover(record)
        with self._lock:
            live = self._live.get(handle)
        if live is not None:
            return live
        assert self.store is not None
        return process_records(self.store, run_id)[handle]

    def list(self, run_id: str) -> list[ProcessInfo]:
        """The run's processes, in the order they started (recovering those whose host died)."""
        if self.store is None:
            with self._lock:
                return [live.info() for live in self._live.values() if live.run_id == run_id]
        for record in process_records(self.store, run_id).values():
            self._recover(record)
        with self._lock:
            here = {h: live.info() for h, live in self._live.items() if live.run_id == run_id}
        return [here.get(handle) or record.info() for handle, record
                in process_records(self.store, run_id).items()]

    def outcome(self, found: _Live | ProcessRecord) -> Ok | Err | None:
        """The process's result, or ``None`` while it runs."""
        if isinstance(found, _Live):
            return found.result
        if self.store is None:
            return None
        ended = process_records(self.store, found.run_id)[found.handle].ended
        return None if ended is None else result_of(ended)

    @staticmethod
    def pause(found: _Live | ProcessRecord, seconds: float, cancelled: CancelToken) -> None:
        """Wait up to ``seconds`` for the process to end (one this host runs wakes this at
        once), or for the waiter's ``cancelled`` token."""
        if isinstance(found, _Live):
            found.done.wait(seconds)
        else:
            cancelled.wait(seconds)

    def cancel(self, run_id: str, handle: Any) -> bool:
        """Cancel the process; whether it was running."""
        found = self.find(run_id, handle)
        if not isinstance(found, _Live):
            if found.ended is not None:
                return False
            raise ProcessError("process_running_elsewhere", (
                f"process {found.handle} runs in another host ({found.holder}); cancel it "
                "there"))
        with self._lock:
            if found.result is not None:
                return False
            found.cancelled = True
            actor = found.actor
        self._log.info("process_cancelled", run_id=run_id, handle=found.handle, why="cancel")
        if actor is not None:
            _stop(actor)
        return True


def _json_spec(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        parsed: dict[str, Any] = json.loads(json.dumps(spec, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ProcessError("process_not_json", (
            "with a run store a process's arguments and options are JSON (they are stored "
            f"to run it again after a restart): {exc}")) from exc
    return parsed


class _ProcessProgress:
    """A process's progress sink: each report is a ``tool_progress`` of its run (a heartbeat
    only keeps it alive, the runner's business)."""

    __slots__ = ("_fields", "_run_id", "_tell")

    def __init__(self, tell: Callable[[str, dict[str, Any]], None], run_id: str,
                 fields: dict[str, Any]) -> None:
        self._tell = tell
        self._run_id = run_id
        self._fields = fields

    def report(self, message: str, fraction: float | None) -> None:
        self._tell(self._run_id, {**self._fields, "message": message, "fraction": fraction})

    def heartbeat(self) -> None:
        """Nothing to tell."""


def _process_result(live: _Live, reply: CallReply) -> Ok | Err:
    result = reply.result
    if isinstance(result, Ok | Err):
        return result
    return Err(ToolError(
        "invalid_return", f"process {live.handle} returned {type(result).__name__}: a process "
        "returns Ok or Err (nobody answers a question or a pending result for it)",
        tool_name=live.name, tool_call_id=reply.tool_call_id, cause=repr(result)))


def _interrupted(record: ProcessRecord) -> ToolError:
    return ToolError(
        "handler_exit", f"process {record.handle} stopped with the process hosting it "
        "(closed, stopped by Ctrl-C or SIGTERM, or killed) before it ended, and is not run "
        "again (at most once: its function is not retryable and journaled no steps, or has no "
        "name to be found by)",
        tool_name=str(record.spec.get("name")), tool_call_id=record.durable_id,
        cause="interrupted", code="interrupted")


def _seconds(value: float) -> float:
    check_seconds("timeout", value, positive=False)
    return float(value)


def _code(result: Err) -> str | None:
    return result.reason.code if isinstance(result.reason, ToolError) else None


def _stop(actor: ActorRef[Any]) -> None:
    with contextlib.suppress(ActorDeadError):
        actor.stop(block=False)

