"""Worker processes for the tests: ``python -m toolvisor.cli worker`` on a store, read line by
line.

Each :class:`WorkerProcess` has a reader thread that files the worker's stdout lines as they
come (the thread ends when the process closes its stdout); :meth:`WorkerProcess.expect` waits
for a line and :func:`until` for what several workers printed, so nothing sleeps.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACTORY = "tests.programs.worker_app:make_agent"
WAIT = 60.0  # seconds: a bound on a wait that must end far sooner, never a timing
_CHANGED = threading.Condition()  # every worker's lines: a reader notifies it on each line


def until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` (of what workers printed) holds."""
    with _CHANGED:
        assert _CHANGED.wait_for(condition, WAIT), "the workers never printed what was awaited"


class WorkerProcess:
    """One worker process; ``lines`` is what it printed so far (guarded by ``_CHANGED``)."""

    def __init__(self, store: str, *, ttl: float = 30.0, block: bool = False,
                 concurrency: int = 4, grace: float = 30.0, poll: float = 0.05,
                 factory: str = FACTORY, reconnect_for: float = 60.0) -> None:
        env = dict(os.environ, TOOLVISOR_TEST_LEASE_TTL=str(ttl),
                   TOOLVISOR_TEST_BLOCK="1" if block else "0", PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolvisor.cli", "worker", "--store", store, factory,
             "--concurrency", str(concurrency), "--poll", str(poll), "--grace", str(grace),
             "--reconnect-for", str(reconnect_for)],
            cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.process.pid
        self.lines: list[str] = []
        self._changed = _CHANGED
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.lines.append("")  # the end of its output
            self._changed.notify_all()

    def expect(self, wanted: Callable[[str], bool] | str) -> str:
        """The first line that ``wanted`` accepts (or that starts with it), once printed."""
        test = wanted if callable(wanted) else (lambda line: line.startswith(wanted))
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(test(line) for line in self.lines) or "" in self.lines, WAIT)
            match = [line for line in self.lines if test(line)]
            assert found and match, (f"worker {self.pid} never printed {wanted!r}; it "
                                     f"printed {self.lines}, stderr: {self.stderr()}")
            return match[0]

    def ready(self) -> WorkerProcess:
        self.expect(f"worker {self.pid} ready")
        return self

    def said(self, word: str) -> list[str]:
        """The run ids of the lines ``word RUN_ID ...`` printed so far."""
        with self._changed:
            return [line.split()[1] for line in self.lines if line.startswith(word + " ")]

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return "(still running)"
        return self.process.stderr.read()

    def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(WAIT)

    def signal_a_thread(self, signum: int) -> None:
        """Send ``signum`` to one of the worker's threads other than its main one (``tgkill``),
        as the kernel does with a signal sent to the process when another one is pending."""
        tid = next(int(task.name) for task in Path(f"/proc/{self.pid}/task").iterdir()
                   if int(task.name) != self.pid)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.tgkill(self.pid, tid, signum) != 0:
            raise OSError(ctypes.get_errno(), f"tgkill of thread {tid} of {self.pid} failed")

    def catches(self, signum: int) -> bool:
        """Whether the worker has a handler for ``signum`` (its ``SigCgt`` mask says so)."""
        status = Path(f"/proc/{self.pid}/status").read_text(encoding="utf-8")
        caught = next(line.split()[1] for line in status.splitlines()
                      if line.startswith("SigCgt:"))
        return bool(int(caught, 16) >> (signum - 1) & 1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(WAIT) == -signal.SIGKILL

    def reap(self) -> None:
        """Whatever happened, leave no process, thread or pipe behind."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._reader.join()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
