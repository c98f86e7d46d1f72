"""Host programs that crash tests start as real subprocesses, read and SIGKILL.

A host prints one JSON object per line when it reaches a point the test waits for, so a test
never sleeps: it reads the line (``next_line``), then kills the host there (``kill``).
``started_hosts`` starts them and, at the end of the test (one that failed early included),
kills any still alive and closes their pipes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

Start = Callable[..., "subprocess.Popen[str]"]
"""Start the host module with these arguments (each made a ``str``); its stdout is a pipe."""


@contextmanager
def started_hosts(module: str) -> Iterator[Start]:
    """``start(*args)`` runs ``python -m module *args`` from the project's root."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: Any) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-m", module, *map(str, args)], cwd=ROOT,
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def next_line(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The next JSON line the host printed; a host that exited instead fails the test."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the host exited early with {process.wait()}"
    data: dict[str, Any] = json.loads(line)
    return data


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL the host, and check that is what ended it."""
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
