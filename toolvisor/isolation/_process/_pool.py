"""``process`` isolation: a supervised pool of worker processes, killed for real at a deadline.

The pool is the workers' supervisor: one manager thread starts them, hands them calls, reads
their results, kills the one running a call past its deadline (SIGKILL) and replaces any worker
that dies, whatever killed it (a permanent child, restarted without an intensity limit: a
worker dying is a handler's failure, reported on that call, not the pool's). Each worker has a
second pipe, its context link, answered by a thread of its own (``_context_server.py``): the
handler's capabilities are served there, on the call's real context.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from typing import Any, ClassVar

from toolvisor._logging import get_event_log
from toolvisor.contract import CallContext, Err, HandlerResult, Tool
from toolvisor.isolation._backend import IsolationBackend, MpContext, Runtime
from toolvisor.isolation._link._context_server import join_links, serve_link
from toolvisor.isolation._process._forkserver import ensure_forkserver
from toolvisor.isolation._process._main_guard import check_main_guard
from toolvisor.isolation._process._request import check_importable, work_request
from toolvisor.isolation._process._worker import READY, serve
from toolvisor.isolation._running import RunningCall

_log = get_event_log("tool_runner", isolation="process")
_REAP_WAIT = 2.0  # seconds to wait for a worker whose pipe closed to be reaped
# Restart intensity for workers that die before they are ready (OTP's MaxR / MaxT). Deaths
# during a call (the handler exited, crashed, or was killed at its deadline) are that call's
# handler_exit and never count: they are the normal business of this pool.
_MAX_START_FAILURES = 5
_START_FAILURE_WINDOW = 10.0
_STOP_WAIT = 1.0  # seconds an idle worker gets to exit on request at close, before SIGKILL


def prepare_process_isolation(mp_context: MpContext = "forkserver") -> None:
    """Start the process-wide multiprocessing helpers now (the forkserver, the resource tracker).

    They live as long as the Python process (and die with it, however it dies: see
    ``_forkserver.py``) and hold a few file descriptors; starting them before a leak check
    keeps them out of it. Idempotent.

    ``mp_context``: the start method the pools will use, ``"forkserver"`` or ``"spawn"``.
    """
    if mp_context == "forkserver":
        ensure_forkserver()
    elif mp_context == "spawn":
        resource_tracker.ensure_running()
    else:
        raise ValueError(f"mp_context must be 'forkserver' or 'spawn', got {mp_context!r}")


_running_lock = threading.Lock()
_running: set[ProcessBackend] = set()  # pools whose manager thread runs, until closed


def _close_at_exit() -> None:
    """Close every pool its owner left running, at interpreter exit.

    Registered after ``multiprocessing.util`` (imported above), so it runs before that
    module's own exit handler, which terminates the workers and then joins every child: a
    manager thread still running would replace the terminated workers, and the join would
    wait for the replacements for ever.
    """
    with _running_lock:
        pools = list(_running)
    for pool in pools:
        pool.close(0.0)


atexit.register(_close_at_exit)


class Worker:
    """One worker process and the parent's end of its pipe; ``call`` is the call it runs
    (written by the manager thread, read by the worker's link thread)."""

    __slots__ = ("call", "conn", "killed", "link", "process", "ready", "tag")

    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.call: RunningCall | None = None
        self.tag = 0  # the link tag of ``call``
        self.killed = False
        self.ready = False  # it sent READY: it started and may take calls
        self.link: threading.Thread | None = None

    def context(self, tag: int) -> CallContext | None:
        """The context of the call this worker runs now, if ``tag`` names it (for its link
        thread: a request from a thread an earlier call left behind gets nothing)."""
        call = self.call
        return None if call is None or tag != self.tag else call.ctx


class ProcessBackend(IsolationBackend):
    """Runs calls on ``process_workers`` worker processes; calls beyond that wait for a free
    worker. Arguments are validated here (a bad call never costs a round trip); the handler is
    imported in the worker by module and name; ``ctx.context`` and ``ctx.engine`` stay here,
    the rest of the context is served to the worker (``_context_server.py``).

    The pool supervises its workers: every dead worker is replaced, except that more than
    ``_MAX_START_FAILURES`` workers dying before they are ready within
    ``_START_FAILURE_WINDOW`` seconds means they cannot start at all (say, the program's
    ``__main__`` cannot be imported in a worker): the pool then stops restarting them and every
    waiting and later call ends ``handler_exit`` with code ``worker_pool_failed``.

    Everything about the workers (the list, who is idle, the waiting calls) is owned by the
    manager thread; other threads post ``("submit" | "stop" | "close", ...)`` to ``_inbox`` and
    write a byte to the wake-up pipe. A call's deadline starts when a worker takes it.
    """

    stop_wait: ClassVar[float] = _STOP_WAIT
    """Seconds an idle worker gets to exit on request at close, before SIGKILL."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        size, mp_context = runtime.process_workers, runtime.mp_context
        if size < 1:
            raise ValueError(f"process_workers must be >= 1, got {size!r}")
        if mp_context not in ("forkserver", "spawn"):
            raise ValueError(f"mp_context must be 'forkserver' or 'spawn', got {mp_context!r}")
        self._size = size
        self._mp_context = mp_context
        self._start_lock = threading.Lock()  # guards _thread, _closed and the wake-up pipe
        self._thread: threading.Thread | None = None
        self._closed = False
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._wake_r = self._wake_w = -1
        self._names = itertools.count()
        # Owned by the manager thread:
        self._workers: list[Worker] = []
        self._links: list[threading.Thread] = []  # link threads of workers started so far
        self._idle: collections.deque[Worker] = collections.deque()
        self._waiting: collections.deque[tuple[RunningCall, bytes, int]] = collections.deque()
        self._closing = False
        self._start_failures: collections.deque[float] = collections.deque()
        self._failed: str | None = None  # why the pool gave up restarting workers
        self._alive = 0  # written by the manager, read by stats (an int: reads are atomic)

    def gauges(self) -> dict[str, int]:
        return {"workers_alive": self._alive}

    def _post(self, message: tuple[str, Any]) -> None:
        with self._start_lock:
            if not self._closed:
                if self._thread is None:
                    if message[0] != "submit":  # nothing to stop yet
                        return
                    self._start()
                self._inbox.put(message)
                os.write(self._wake_w, b"\0")
                return
        if message[0] == "submit":  # closed at interpreter exit while its owner still runs
            call = message[1][0]
            self.runtime.settle(call, call.cancelled_error())

    def _start(self) -> None:
        """Start the manager thread (under ``_start_lock``); it is closed at interpreter exit
        if its owner does not close it first."""
        self._prepare()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._manage, name="toolvisor-process-pool",
                                        daemon=True)
        with _running_lock:
            _running.add(self)
        self._thread.start()

    def _prepare(self) -> None:
        """Start what the workers need before the first of them (the forkserver)."""
        prepare_process_isolation(self._mp_context)

    @classmethod
    def check(cls, tool: Tool) -> None:
        super().check(tool)
        check_importable(tool)

    def check_start(self, tool: Tool) -> None:
        """Before the workers first start: ``RuntimeError`` (in the caller's thread) if they
        would run this program again (see ``_main_guard.py``)."""
        if self._thread is None:
            check_main_guard(lambda: (tool.name,))

    def submit(self, call: RunningCall) -> None:
        """Queue ``call`` (its pickled ``WorkRequest`` and its link tag) for the next free
        worker, or settle it now if it cannot be sent."""
        request = work_request(call)
        if isinstance(request, Err):
            self.runtime.settle_soon(call, request)
        else:
            self._post(("submit", (call, *request)))

    def stop(self, call: RunningCall) -> None:
        """Kill the worker running ``call`` (called once the call was claimed)."""
        self._post(("stop", call))

    def close(self, grace: float) -> None:
        """Stop every worker (idle ones politely, busy ones with SIGKILL) and the manager.
        Idempotent; a call submitted later is cancelled."""
        with self._start_lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._inbox.put(("close", None))
                os.write(self._wake_w, b"\0")
        if thread is None:
            return
        thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        with _running_lock:
            _running.discard(self)

    # -- the manager thread ------------------------------------------------------------------

    def _manage(self) -> None:
        context = multiprocessing.get_context(self._mp_context)
        for _ in range(self._size):
            self._spawn(context)
        while not self._closing or any(w.call is not None for w in self._workers):
            by_conn = {w.conn: w for w in self._workers if w.call is not None or not w.ready}
            by_sentinel = {w.process.sentinel: w for w in self._workers}
            ready = wait([self._wake_r, *by_conn, *by_sentinel])
            for conn in (r for r in ready if r in by_conn):
                worker = by_conn[conn]
                if worker.ready:
                    self._receive(worker)
                else:
                    self._started(worker)
            for sentinel in (r for r in ready if r in by_sentinel):
                worker = by_sentinel[sentinel]
                if worker in self._workers:
                    self._reap(worker, context)
            if self._wake_r in ready:
                os.read(self._wake_r, 4096)
                self._read_inbox()
            self._dispatch()
        self._stop_all()

    def _read_inbox(self) -> None:
        while True:
            try:
                kind, payload = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "submit":
                self._waiting.append(payload)
                if self._failed is not None:
                    self._fail_waiting()
            elif kind == "stop":
                self._kill_running(payload)
            elif kind == "close":
                self._closing = True
                for worker in self._workers:
                    if worker.call is not None and not worker.killed:
                        self._kill(worker)
            else:
                self._on_message(kind, payload)

    def _on_message(self, kind: str, payload: Any) -> None:
        """A message of a kind a subclass posts, on the manager thread."""
        raise ValueError(f"the pool's manager got an unknown message {kind!r}")

    def _launch(self, context: BaseContext, name: str, child_end: Connection,
                link_child_end: Connection) -> Any:
        """Start one worker process serving on the two pipe ends given; the process (a
        ``multiprocessing`` one, or anything with its ``pid``, ``sentinel``, ``exitcode``,
        ``kill``, ``join`` and ``close``)."""
        # the worker dies with its parent (see _forkserver.py): this process (the pool's
        # manager thread, which outlives its workers) or the forkserver
        parent = ensure_forkserver() if self._mp_context == "forkserver" else os.getpid()
        process = context.Process(  # type: ignore[attr-defined]
            target=serve, args=(child_end, link_child_end), kwargs={"parent": parent},
            name=name, daemon=True,
        )
        process.start()
        return process

    def _serve_link(self, conn: Connection, worker: Worker) -> None:
        """The worker's link thread: answer its context requests until its end closes."""
        serve_link(conn, worker.context)

    def _spawn(self, context: BaseContext) -> None:
        parent_end, child_end = context.Pipe(duplex=True)
        link_end, link_child_end = context.Pipe(duplex=True)
        name = f"toolvisor-worker-{next(self._names)}"
        try:
            process = self._launch(context, name, child_end, link_child_end)
        except OSError as exc:  # nothing to supervise: the pool cannot start workers at all
            for end in (parent_end, link_end):
                end.close()
            self._failed = f"a worker process could not be started: {exc}"
            _log.error("worker_pool_failed", detail=self._failed)
            self._fail_waiting()
            return
        finally:
            child_end.close()
            link_child_end.close()
        worker = Worker(process, parent_end)
        # The link thread ends when the worker's end closes (it exited or was killed).
        worker.link = threading.Thread(target=self._serve_link, args=(link_end, worker),
                                       name=f"{name}-link", daemon=True)
        worker.link.start()
        self._links = [t for t in self._links if t.is_alive()]
        self._links.append(worker.link)
        self._workers.append(worker)
        self._alive = len(self._workers)
        self.runtime.count("workers_started")
        _log.debug("worker_started", pid=process.pid)

    def _started(self, worker: Worker) -> None:
        """The worker's first message arrived: it is ready for calls (or it died trying)."""
        try:
            hello = worker.conn.recv_bytes()
        except (EOFError, OSError):
            return  # it died before it was ready: its reaping counts the failed start
        if hello != READY:
            raise RuntimeError(f"a worker's first message was {hello[:40]!r}, not READY")
        worker.ready = True
        self._idle.append(worker)

    def _dispatch(self) -> None:
        while self._idle and self._waiting and not self._closing:
            call, request, tag = self._waiting.popleft()
            worker = self._idle.popleft()
            with call.lock:
                if call.settled:  # cancelled while it waited
                    self._idle.appendleft(worker)
                    continue
                call.worker = worker
            worker.tag = tag
            worker.call = call
            self.runtime.arm(call)
            try:
                worker.conn.send_bytes(request)
            except OSError:  # the worker died while idle: its reaping settles the call
                continue

    def _receive(self, worker: Worker) -> None:
        call = worker.call
        assert call is not None
        try:
            data = worker.conn.recv_bytes()
        except (EOFError, OSError):
            return  # the worker died: its sentinel is (or soon will be) ready
        try:
            result: HandlerResult = pickle.loads(data)
        except Exception as exc:
            result = call.error("encoding_failed",
                                f"the result from the worker cannot be unpickled: "
                                f"{type(exc).__name__}: {exc}", f"{type(exc).__name__}: {exc}")
        with call.lock:
            call.worker = None
        worker.call = None
        self._idle.append(worker)
        self.runtime.settle(call, result)

    def _kill_running(self, call: RunningCall) -> None:
        with call.lock:
            worker = call.worker
        if isinstance(worker, Worker) and worker.call is call and not worker.killed:
            self._kill(worker)

    def _kill(self, worker: Worker) -> None:
        worker.killed = True
        worker.process.kill()
        self.runtime.count("workers_killed")
        call = worker.call
        _log.warning("worker_killed", pid=worker.process.pid,
                     tool_name=call.tool.name if call else None,
                     tool_call_id=call.ctx.tool_call_id if call else None)

    def _reap(self, worker: Worker, context: BaseContext) -> None:
        """A worker exited: settle its call as ``handler_exit`` (unless the runner killed it),
        release it, and start a replacement unless the pool is closing."""
        worker.process.join(_REAP_WAIT)
        code, pid = worker.process.exitcode, worker.process.pid
        self._release(worker)
        call = worker.call
        if call is not None:
            with call.lock:
                call.worker = None
            call.token.set()  # the call is over: a request still served for it stops waiting
        if not worker.killed:
            self.runtime.count("workers_died")
            _log.warning("worker_died", pid=pid, exitcode=code, ready=worker.ready,
                         tool_name=call.tool.name if call else None,
                         tool_call_id=call.ctx.tool_call_id if call else None)
            if call is not None:
                self.runtime.settle(call, self._exit_error(worker, call, code))
        if not worker.ready and not worker.killed and self._start_failed(code):
            return
        if not self._closing:
            self._spawn(context)
            self.runtime.count("workers_replaced")

    def _start_failed(self, code: int | None) -> bool:
        """Count a worker that died before it was ready; ``True`` once past the intensity."""
        if self._failed is not None:
            return True
        now = time.monotonic()
        self._start_failures.append(now)
        while self._start_failures[0] < now - _START_FAILURE_WINDOW:
            self._start_failures.popleft()
        if len(self._start_failures) <= _MAX_START_FAILURES:
            return False
        self._failed = (
            f"worker processes keep dying before they are ready ({len(self._start_failures)} "
            f"in {_START_FAILURE_WINDOW:g} s, last exit code {code}), so the pool stopped "
            "restarting them; a worker must be able to import the program's __main__ and the "
            "handlers' modules (run the program from a file or with -m, not from stdin)"
        )
        _log.error("worker_pool_failed", detail=self._failed)
        self._fail_waiting()
        return True

    def _fail_waiting(self) -> None:
        assert self._failed is not None
        while self._waiting:
            call, _, _ = self._waiting.popleft()
            if not call.settled:
                self.runtime.settle(call, call.error("handler_exit", self._failed, self._failed,
                                              code="worker_pool_failed"))

    def _release(self, worker: Worker) -> None:
        self._workers.remove(worker)
        if worker in self._idle:
            self._idle.remove(worker)
        self._alive = len(self._workers)
        worker.conn.close()
        if worker.process.exitcode is not None:
            worker.process.close()

    def _stop_all(self) -> None:
        for worker in self._workers:
            try:
                worker.conn.send_bytes(pickle.dumps(None))
            except OSError:
                continue
        for worker in self._workers:
            worker.process.join(self.stop_wait)
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join()
        for worker in list(self._workers):
            self._release(worker)
        for call, _, _ in self._waiting:
            if not call.settled:
                self.runtime.settle(call, call.cancelled_error())
        self._waiting.clear()
        join_links(self._links, _log)

    def _exit_error(self, worker: Worker, call: RunningCall, code: int | None) -> Err:
        """The result of ``call``, whose worker exited by itself with ``code``."""
        return exit_error(call, code)


def exit_error(call: RunningCall, code: int | None) -> Err:
    """``handler_exit`` naming the exit code, or the signal (a negative code) that ended it."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return call.error("handler_exit", f"the worker process died from {name}", name)
    return call.error("handler_exit", f"the worker process exited with code {code}", code)
