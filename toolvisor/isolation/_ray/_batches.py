"""Calls of ``ray`` tools sent in batches: the calls of one tool that start together share
Ray tasks, and each call still settles, times out and is cancelled on its own.

A Ray task costs the driver far more than running a small handler does (its submission, its
lease, its reply), so calls that start together are not sent one task each. ``submit`` queues
a call for the sender thread. A call queued alone goes at once, as a plain task; a call queued
less than ``GAP`` after the one before opens a gathering: the sender waits while calls keep
coming (until ``GAP`` passes without one, ``WINDOW`` at most), and sends what was queued
meanwhile together, grouped by tool and split into one task per CPU of the cluster
(``BATCH_LIMIT`` calls each at most). Such a task runs each of its calls at once on a thread
of its own in its worker and streams each result back as it finishes (``_task.run_batch``).

A call stopped (its deadline, a cancel) while its task runs delivers its result at once, like
any other; its task's worker is then killed (``ray.cancel(force=True)``) as soon as no other
call of the task is still running unsettled: at once when it is alone, else when the last of
the others finishes or is itself settled (at its own deadline at the latest). A sibling is
never killed under a running call, never sent again and never lost. A call that kills its
worker process (``os._exit``, a crash) ends the calls of its task still running with
``handler_exit``, as Ray reports it.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import ModuleType
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import HandlerResult, Tool
from toolvisor.isolation._backend import Runtime
from toolvisor.isolation._ray._links import LinkAddress, RayContextLinks
from toolvisor.isolation._ray._task import BATCH_LIMIT, CallFields, Finished, run_batch, run_task
from toolvisor.isolation._ray._tools import shipped_tool
from toolvisor.isolation._running import RunningCall

_log = get_event_log("tool_runner", isolation="ray")
GAP = 0.0005  # seconds without a new call that end a gathering
WINDOW = 0.005  # seconds a gathering lasts at most
_CLOSE_WAIT = 10.0  # seconds close waits for each batch's reader once its calls are settled

Outcome = Callable[[RunningCall, Callable[[], bytes]], HandlerResult]
"""A call's result from fetching its task's output: the pickled result, or Ray's exception."""
Result = Callable[[RunningCall], HandlerResult]


class Batch:
    """The calls sent in one Ray task. ``running`` (the indexes whose result has not come
    back), ``doomed`` (a settled call still runs in the task) and ``killed`` are guarded by
    ``lock``; ``calls`` and ``addresses`` are fixed; ``stream`` is written once, before any
    reader or stop can see the batch."""

    __slots__ = ("addresses", "calls", "doomed", "killed", "lock", "running", "stream")

    def __init__(self, calls: list[RunningCall], addresses: list[LinkAddress]) -> None:
        self.calls = calls
        self.addresses = addresses
        self.lock = threading.Lock()
        self.running = set(range(len(calls)))
        self.doomed = False
        self.killed = False
        self.stream: Any = None

    def must_die(self) -> list[str | None] | None:
        """With ``lock`` held: if the task is to be killed now (a settled call still runs in
        it and no unsettled one does), marks it killed and gives the ids of the calls that
        still run there; else ``None``."""
        if self.killed or not self.doomed \
                or any(not self.calls[i].settled for i in self.running):
            return None
        self.killed = True
        return [self.calls[i].ctx.tool_call_id for i in sorted(self.running)]


class Seat:
    """What ``call.worker`` is for a batched call: its batch and its index there."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: Batch, index: int) -> None:
        self.batch = batch
        self.index = index


class RayBatches:
    """Queues, sends and reads back one runner's batched calls.

    ``_waiting``, ``_last``, ``_burst``, ``_closing``, ``_sender`` and ``_readers`` are
    guarded by ``_lock``; the sender thread (``toolvisor-ray-send``) takes what is queued and
    sends it. Each batch's stream is read by a thread of its own (``toolvisor-ray-batch``),
    which ends with the task; a batch of one call is a plain task, settled when it completes.
    ``_ray``, ``_task``, ``_single``, ``_cpus`` and ``_links`` are written once, by
    :meth:`connect`, before the first call is submitted.
    """

    def __init__(self, runtime: Runtime, outcome: Outcome) -> None:
        self._runtime = runtime
        self._outcome = outcome
        self._lock = threading.Lock()
        self._waiting: list[tuple[RunningCall, LinkAddress, CallFields]] = []
        self._more = threading.Condition(self._lock)  # a call was queued, or closing
        self._closing = False
        self._last = -GAP  # when the last call was queued
        self._burst = False  # whether the first call queued now came close after another
        self._sender: threading.Thread | None = None
        self._readers: list[threading.Thread] = []
        self._ray: Any = None
        self._task: Any = None
        self._single: Any = None
        self._cpus = 1
        self._full = BATCH_LIMIT
        self._links: Any = None

    def connect(self, ray: ModuleType, links: RayContextLinks) -> None:
        """Send to the cluster ``ray`` is connected to, one task per CPU of it at most."""
        self._ray, self._links = ray, links
        self._task = ray.remote(run_batch).options(num_returns="streaming", max_retries=0,
                                                   retry_exceptions=False)
        self._single = ray.remote(run_task).options(max_retries=0, retry_exceptions=False)
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._full = self._cpus * BATCH_LIMIT

    def submit(self, call: RunningCall, fields: CallFields) -> bool:
        """Queue ``call`` for the sender (started with the first call); ``False`` once closed."""
        with self._lock:
            if self._closing:
                return False
            now = time.monotonic()
            if not self._waiting:  # a call alone goes at once; one that follows another
                self._burst = now - self._last < GAP  # closely opens a gathering
                self._more.notify()
            self._last = now
            self._waiting.append((call, fields[1], fields))
            if self._sender is None:
                self._sender = threading.Thread(target=self._send_all, daemon=True,
                                                name="toolvisor-ray-send")
                self._sender.start()
        return True

    def _send_all(self) -> None:
        """The sender's loop: gather what is queued while calls keep coming, send it."""
        while True:
            with self._lock:
                while not self._waiting and not self._closing:
                    self._more.wait()
                if not self._waiting:
                    return
                started = time.monotonic()
                seen = len(self._waiting)
                while self._burst and seen < self._full and not self._closing \
                        and time.monotonic() - started < WINDOW:
                    self._more.wait(GAP)
                    if len(self._waiting) == seen:
                        break  # none came within a gap: the calls that start together are in
                    seen = len(self._waiting)
                waiting, self._waiting = self._waiting, []
            by_tool: dict[Tool, list[tuple[RunningCall, LinkAddress, CallFields]]] = {}
            for item in waiting:
                if item[0].settled:  # cancelled while it waited: it never starts
                    self._links.forget(item[1])
                else:
                    by_tool.setdefault(item[0].tool, []).append(item)
            for group in by_tool.values():
                for part in _parts(group, self._cpus):
                    self._send(part)

    def _send(self, part: list[tuple[RunningCall, LinkAddress, CallFields]]) -> None:
        links = self._links
        batch = Batch([call for call, _, _ in part], [address for _, address, _ in part])
        tool = shipped_tool(batch.calls[0].tool)
        try:
            if len(part) == 1:  # a plain task: its worker is free when its result is back
                batch.stream = self._single.remote(tool, part[0][0].arguments, part[0][2])
            else:
                batch.stream = self._task.remote(
                    tool, [(call.arguments, fields) for call, _, fields in part])
        except Exception as exc:
            for call, address in zip(batch.calls, batch.addresses, strict=True):
                links.forget(address)
                self._runtime.settle_soon(call, call.error(
                    "encoding_failed",
                    f"the call cannot be sent to Ray: {type(exc).__name__}: {exc}",
                    f"{type(exc).__name__}: {exc}"))
            return
        self._runtime.count("ray_tasks")
        for index, call in enumerate(batch.calls):
            with call.lock:
                cancelled = call.settled  # stopped while it was being sent
                if not cancelled:
                    call.worker = Seat(batch, index)
            if cancelled:
                self._stopped(batch, index)
            else:
                self._runtime.arm(call)
        if len(part) == 1:
            batch.stream.future().add_done_callback(
                lambda done: self._finish(batch, 0, self._completed(done)))
            return
        reader = threading.Thread(target=self._read, args=(batch,), daemon=True,
                                  name="toolvisor-ray-batch")
        with self._lock:
            self._readers = [t for t in self._readers if t.is_alive()]
            self._readers.append(reader)
        reader.start()

    def _read(self, batch: Batch) -> None:
        """Settle each call as its result streams back; when the task ends, settle any call
        it did not answer from how it ended."""
        failure: Exception | None = None
        for ref in batch.stream:
            try:
                finished: list[Finished] = self._ray.get(ref)
            except Exception as exc:  # the task failed: the rest share its fate
                failure = exc
                break
            for index, data, raised in finished:
                self._finish(batch, index, _raised(data) if raised else self._returned(data))
        with batch.lock:
            left = sorted(batch.running)
        for index in left:
            self._finish(batch, index, self._failed(failure))

    def _completed(self, done: Future[bytes]) -> Result:
        """The result of a lone call whose task completed (``done``: its future)."""
        return lambda call: self._outcome(call, done.result)

    def _returned(self, data: bytes) -> Result:
        """The result of a call that returned ``data`` (its pickled result)."""
        return lambda call: self._outcome(call, lambda: data)

    def _failed(self, failure: Exception | None) -> Result:
        """The result of a call its task did not answer: from how the task failed."""
        def result(call: RunningCall) -> HandlerResult:
            if failure is None:
                return call.error("handler_exit", "the Ray task ended without its result",
                                  "no result")

            def fetch() -> bytes:
                raise failure
            return self._outcome(call, fetch)
        return result

    def _finish(self, batch: Batch, index: int, result: Result) -> None:
        with batch.lock:
            batch.running.discard(index)
            killed = batch.must_die()
        if killed is not None:
            self._kill(batch, killed)
        call = batch.calls[index]
        with call.lock:
            call.worker = None
        self._links.forget(batch.addresses[index])
        call.token.set()  # its handler is over: a request still served for it stops waiting
        self._runtime.settle(call, result(call))

    def stop(self, seat: Seat) -> None:
        """``seat``'s call was settled by its deadline or a cancel: kill its task once no
        unsettled call runs there."""
        self._stopped(seat.batch, seat.index)

    def _stopped(self, batch: Batch, index: int) -> None:
        with batch.lock:
            if index not in batch.running:
                return  # its handler already returned
            batch.doomed = True
            killed = batch.must_die()
        if killed is not None:
            self._kill(batch, killed)

    def _kill(self, batch: Batch, calls: list[str | None]) -> None:
        """Kill ``batch``'s task, where ``calls`` (ids), all settled, still run."""
        self._ray.cancel(batch.stream, force=True)
        self._runtime.count("workers_killed")
        _log.warning("ray_task_cancelled", tool_name=batch.calls[0].tool.name,
                     tool_call_ids=calls)

    def close(self) -> None:
        """Stop the sender, then wait for the readers (every call is settled by now, so every
        task ends)."""
        with self._lock:
            self._closing = True
            self._more.notify()
            sender = self._sender
        if sender is not None:
            sender.join()
        with self._lock:
            readers = list(self._readers)
        for reader in readers:
            reader.join(_CLOSE_WAIT)
            if reader.is_alive():
                _log.error("ray_batch_reader_left", thread=reader.name)


def _parts(group: list[Any], cpus: int) -> Iterator[list[Any]]:
    """``group`` split evenly into one part per CPU (never more parts than calls), none
    larger than ``BATCH_LIMIT``."""
    count = max(min(len(group), cpus), -(-len(group) // BATCH_LIMIT))
    size, extra = divmod(len(group), count)
    start = 0
    for n in range(count):
        end = start + size + (n < extra)
        yield group[start:end]
        start = end


def _raised(data: bytes) -> Result:
    """The result of a call whose ``run_task`` raised (``data``: the pickled exception)."""
    def result(call: RunningCall) -> HandlerResult:
        try:
            cause = pickle.loads(data)
        except Exception as exc:
            return call.error("encoding_failed", f"the exception from the Ray task cannot be "
                              f"unpickled: {type(exc).__name__}: {exc}", repr(exc))
        return call.error("handler_raised", f"{type(cause).__name__}: {cause}", cause)
    return result
