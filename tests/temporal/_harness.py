"""The session's Temporal servers, driven from synchronous tests.

Each server runs on one event loop thread of the session (started before any test's leak
check takes its snapshot); a test hands coroutines to that loop with :meth:`Temporal.run`
and gets a worker of its own, on a task queue of its own, with :func:`working`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from toolvisor.contract import ToolResultMessage
from toolvisor.temporal import AgentWorker, FinalOutcome, TemporalAgent

T = TypeVar("T")
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
def working(server: Temporal, *agents: TemporalAgent) -> Iterator[str]:
    """A worker for ``agents`` on a new task queue (yielded) while the block runs."""
    queue = f"q-{uuid.uuid4().hex[:12]}"

    async def start() -> AgentWorker:
        worker = AgentWorker(server.client, agents, task_queue=queue, process_workers=1)
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
