"""The session's Temporal servers, driven from synchronous tests.

Each server runs on one event loop thread of the session (started before any test's leak
check takes its snapshot); a test hands coroutines to that loop with :meth:`Temporal.run`
and gets a worker of its own, on a task queue of its own, with :func:`working`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from toolvisor.contract import ToolResultMessage
from toolvisor.temporal import AgentWorker, FinalOutcome, TemporalAgent

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
WAIT = 20.0  # seconds a test waits for one step of a run at most


class Temporal:
    """A server (``env``) whose client lives on ``loop``, a thread of the session's."""

    def __init__(self, loop: asyncio.AbstractEventLoop, env: WorkflowEnvironment) -> None:
        self.loop = loop
        self.env = env

    @property
    def client(self) -> Client:
        return self.env.client

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = WAIT) -> T:
        """Run ``coro`` on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


def on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on ``loop`` (a fixture's, before there is a ``Temporal``)."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result(60)


@contextlib.contextmanager
def working(server: Temporal, *agents: TemporalAgent, queue: str | None = None,
            **options: Any) -> Iterator[str]:
    """A worker for ``agents`` (with ``AgentWorker``'s ``options``) on ``queue``, else a new
    task queue (yielded), while the block runs."""
    queue = queue or f"q-{uuid.uuid4().hex[:12]}"

    async def start() -> AgentWorker:
        worker = AgentWorker(server.client, agents, task_queue=queue, process_workers=1,
                             **options)
        return await worker.__aenter__()

    worker = server.run(start())
    try:
        yield queue
    finally:
        server.run(worker.__aexit__(None, None, None))


def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


def eventually(check: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """Poll ``check`` until it returns something true (an outside process's doing)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def tool_texts(outcome: FinalOutcome) -> dict[str, str]:
    """The text each call's result gave the model, by call id."""
    return {m.tool_call_id: m.content for m in outcome.messages
            if isinstance(m, ToolResultMessage)}


class WorkerChild:
    """``tests.programs.temporal_worker`` in a child process, polling ``queue`` on the
    server at ``target`` for what it ``serves``; ``stall`` makes its ``stall`` tools hang."""

    def __init__(self, target: str, queue: str, *, stall: bool, serves: str = "all") -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), TOOLVISOR_TEST_STALL="1" if stall else "0")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.programs.temporal_worker", target, queue, serves],
            cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.process.pid

    def ready(self) -> WorkerChild:
        """Wait until it polls (it prints ``ready PID``)."""
        out = self.process.stdout
        assert out is not None
        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ)
            if not selector.select(WAIT):
                raise AssertionError(f"worker {self.pid} never got ready")
        line = out.readline()
        assert line == f"ready {self.pid}\n", f"worker {self.pid} said {line!r}: {self.errors()}"
        return self

    def errors(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return "(still running)"
        return self.process.stderr.read()

    def kill(self) -> None:
        """SIGKILL it: no shutdown, no goodbye to the server."""
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(WAIT) == -signal.SIGKILL

    def reap(self) -> None:
        """Whatever happened, leave no process or pipe behind."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(WAIT)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@contextlib.contextmanager
def child_worker(server: Temporal, queue: str, *, stall: bool,
                 serves: str = "all") -> Iterator[WorkerChild]:
    """A ready :class:`WorkerChild` on ``server``, reaped when the block ends."""
    child = WorkerChild(server.client.service_client.config.target_host, queue, stall=stall,
                        serves=serves)
    try:
        yield child.ready()
    finally:
        child.reap()


def ran(folder: Path) -> list[tuple[str, str, int]]:
    """What the crash tests' tools noted in ``folder``: (tool, call id, pid), in order."""
    path = folder / "ran"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [(name, call_id, int(pid)) for name, call_id, pid in (ln.split() for ln in lines)]
