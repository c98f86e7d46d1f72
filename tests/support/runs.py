"""Helpers the agent-level tests share: hostile arguments, cancelling a run mid-flight."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from toolvisor import Agent


def nested(depth: int) -> dict[str, Any]:
    """Arguments nested ``depth`` objects deep."""
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


def cancel_arun_once(agent: Agent, reached: threading.Event) -> None:
    """Start ``agent.arun("go")``, cancel its task once ``reached`` is set, and check the
    awaiting side sees the cancellation."""

    async def main() -> None:
        task = asyncio.ensure_future(agent.arun("go"))
        await asyncio.to_thread(reached.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def close_while_running(agent: Agent, reached: threading.Event) -> BaseException | None:
    """Run ``agent.run("go")`` in a thread, close the agent once ``reached`` is set, and return
    what the run raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            agent.run("go")
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert reached.wait(10)
    agent.close()
    thread.join()
    return raised[0] if raised else None
