"""The forkserver of ``process`` isolation, started so that it dies with this process.

multiprocessing's forkserver exits when no process holding its "alive" pipe is left, but every
worker it forks holds that pipe too: after a ``kill -9`` of the host, a worker stuck in its
handler kept the forkserver alive, and the forkserver (the worker's parent) kept the worker
alive. So the chain is cut from the top, by the kernel (``toolvisor._lifeline``): the
forkserver asks for ``SIGKILL`` when its parent thread ends (``_forkserver_lifeline``, which
it imports at start), each worker asks for it when the forkserver ends (``serve``'s
``parent``), and the resource tracker, whose pipe only those processes hold, then reads EOF and
exits. That parent thread must live as long as this process, or the forkserver (and every
pool's workers) would die with whichever thread happened to start it first: it is
``toolvisor-forkserver``, a daemon thread that starts the forkserver (and the tracker) whenever
:func:`ensure_forkserver` asks, and otherwise waits for the next request.

State: the request queue and the thread are module-level, one per process; the thread is
started once, under ``_lock``.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from concurrent.futures import Future
from multiprocessing import forkserver

PRELOAD = ["toolvisor.isolation._process._forkserver_lifeline", "__main__",
           "toolvisor.isolation._process._worker"]
"""What the forkserver imports at start: its lifeline first, then what every worker needs."""

_lock = threading.Lock()
_thread: threading.Thread | None = None
_requests: queue.SimpleQueue[Future[int]] = queue.SimpleQueue()


def ensure_forkserver() -> int:
    """Start the forkserver (and the resource tracker) on ``toolvisor-forkserver`` unless it
    runs; its pid, the parent every ``forkserver`` worker watches."""
    global _thread  # noqa: PLW0603 - one forkserver thread per process
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="toolvisor-forkserver", daemon=True)
            _thread.start()
    started: Future[int] = Future()
    _requests.put(started)
    return started.result()


def _serve() -> None:
    """The ``toolvisor-forkserver`` thread: start the forkserver on request, for ever."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    while True:
        started = _requests.get()
        try:
            forkserver.ensure_running()
            pid: int = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
        except BaseException as exc:  # the caller's to report
            started.set_exception(exc)
        else:
            started.set_result(pid)
