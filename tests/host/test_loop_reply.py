"""``LoopReply``: a run's outcome delivered from the orchestrator's thread straight to a future
of the caller's event loop, once; a delivery nobody awaits any more (the task was cancelled,
the loop closed) is dropped without an error."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from toolvisor import Agent, Completed
from toolvisor.host import LoopReply, StartRun
from toolvisor.testing import ScriptedModel


def deliver_from_a_thread(deliver: Any, *args: Any) -> None:
    thread = threading.Thread(target=deliver, args=args)
    thread.start()
    thread.join()


def test_the_outcome_set_on_another_thread_is_awaited_on_the_loop_and_set_once() -> None:
    async def main() -> tuple[Any, bool]:
        reply = LoopReply(asyncio.get_running_loop())
        deliver_from_a_thread(reply.set_result, "first")
        done = reply.done()
        deliver_from_a_thread(reply.set_result, "second")  # ignored: delivered once
        deliver_from_a_thread(reply.set_exception, RuntimeError("late"))
        return await reply, done

    assert asyncio.run(main()) == ("first", True)


def test_an_error_set_on_another_thread_is_raised_where_it_is_awaited() -> None:
    async def main() -> Any:
        reply = LoopReply(asyncio.get_running_loop())
        deliver_from_a_thread(reply.set_exception, LookupError("no such run"))
        return await reply

    with pytest.raises(LookupError, match="no such run"):
        asyncio.run(main())


def test_an_outcome_for_a_cancelled_wait_or_a_closed_loop_is_dropped_quietly() -> None:
    problems: list[dict[str, Any]] = []

    async def main() -> LoopReply:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: problems.append(context))
        reply = LoopReply(loop)
        waiting = asyncio.ensure_future(_wait(reply))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        deliver_from_a_thread(reply.set_result, "nobody waits")
        await asyncio.sleep(0)  # the delivery's callback runs, and finds the future cancelled
        return LoopReply(loop)

    after_close = asyncio.run(main())
    after_close.set_result("the loop is closed")  # no RuntimeError from the closed loop
    assert problems == [] and after_close.done()


async def _wait(reply: LoopReply) -> Any:
    return await reply


def test_arun_hands_the_orchestrator_a_loop_reply_and_awaits_it() -> None:
    told: list[Any] = []

    async def main(agent: Agent) -> list[Any]:
        return list(await asyncio.gather(*(agent.arun(f"run {i}") for i in range(20))))

    with Agent(ScriptedModel(["done"] * 20)) as agent:
        orchestrator = agent._orchestrator()
        tell = orchestrator.tell
        orchestrator.tell = lambda message: (told.append(message), tell(message))[1]
        try:
            outcomes = asyncio.run(main(agent))
        finally:
            orchestrator.tell = tell
    assert all(isinstance(o, Completed) and o.text == "done" for o in outcomes)
    starts = [m for m in told if isinstance(m, StartRun)]
    assert len(starts) == 20 and all(isinstance(m.reply, LoopReply) for m in starts)
