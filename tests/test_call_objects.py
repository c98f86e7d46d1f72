"""What a call holds while it waits: each object the cyclic garbage collector tracks is walked
by every full collection, and a wide batch (10,000 asyncio calls in flight) holds them all at
once. A call in flight holds no closure, partial or lock made for it alone (its deadline's
callback, its task's done callback, its supervision link's notify and its handle's cancel are
made once; its once-only flags are untracked dicts until someone waits), so its count stays
small."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

from toolvisor import Ok, Tool, ToolCall
from toolvisor.actors import CallReply, ToolCallDispatcher
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import DynamicSupervisor

CALLS = 200
MAX_TRACKED_PER_CALL = 45  # measured: 42; 62 while its flags each had a lock and a list, and
# its deadline, task callback, link and handle each a closure or bound method of its own (the
# handler's own coroutine, task and context are part of it)


def test_an_asyncio_call_in_flight_holds_few_objects_the_collector_tracks() -> None:
    release = threading.Event()
    entered: list[None] = []

    async def wait(arguments: dict[str, Any]) -> Ok:
        entered.append(None)
        while not release.is_set():
            await asyncio.sleep(0.005)
        return Ok(None)

    tool = Tool(name="wait", handler=wait, isolation="asyncio")
    replies: list[CallReply] = []
    done = threading.Event()

    def reply(outcome: CallReply) -> None:
        replies.append(outcome)
        if len(replies) == CALLS:
            done.set()

    supervisor = DynamicSupervisor.start(max_children=CALLS, shutdown=1.0)
    try:
        with ToolRunner(tool_timeout=30.0) as runner, \
                ToolCallDispatcher(supervisor, runner) as dispatcher:
            warm = threading.Event()
            release.set()
            dispatcher.start_call(tool, ToolCall(id="warm", name="wait"), None,
                                  lambda outcome: warm.set())
            assert warm.wait(10)
            release.clear()
            entered.clear()
            gc.collect()
            gc.disable()
            try:
                before = len(gc.get_objects())
                for index in range(CALLS):
                    dispatcher.start_call(tool, ToolCall(id=f"c{index}", name="wait"), None,
                                          reply)
                while len(entered) < CALLS:
                    release.wait(0.005)
                gc.collect()
                per_call = (len(gc.get_objects()) - before) / CALLS
            finally:
                gc.enable()
                release.set()
            assert done.wait(10)
    finally:
        supervisor.stop()
    assert all(isinstance(r.result, Ok) for r in replies)
    assert per_call <= MAX_TRACKED_PER_CALL, per_call
