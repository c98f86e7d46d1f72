"""The asyncio twins of the agent's blocking methods: ``aresume_run``, ``acancel_run``,
``aresolve`` and ``aclose`` do what their twins do, and a cancelled wait stops only the wait."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolvisor import (
    Agent,
    CallContext,
    Completed,
    DurableError,
    Halted,
    Pending,
    Suspended,
    UnknownRunError,
    function_tool,
)
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import ScriptedModel, call, calls, capture_events


@function_tool
def charge(ctx: CallContext) -> Pending:
    """Charge a card; the provider calls back with the key."""
    ctx.completion_key()
    return Pending(deadline=600)


def agent_waiting_on_a_key(store: Path | SqliteRunStore) -> Agent:
    return Agent(ScriptedModel([calls(call("charge", id="c")), "charged"]), [charge],
                 store=store)


async def waiting(agent: Agent) -> tuple[str, str]:
    """Start a run that suspends on its key; its run id and key."""
    suspended = await agent.arun("charge 42 EUR")
    assert isinstance(suspended, Suspended) and suspended.run_id is not None
    return suspended.run_id, suspended.keys["c"]


def test_a_durable_run_goes_from_start_to_end_on_the_twins(tmp_path: Path) -> None:
    async def main() -> tuple[Any, ...]:
        async with agent_waiting_on_a_key(tmp_path / "runs.sqlite") as agent:
            run_id, key = await waiting(agent)
            first = await agent.aresolve(key, ok={"status": "paid"})
            outcome = await agent.aresume_run(run_id)
            again = await agent.aresolve(key, error="too late")
            return first, outcome, again, await agent.acancel_run(run_id)

    first, outcome, again, cancelled = asyncio.run(main())
    assert (first, again) == ("accepted", "already_resolved")
    assert isinstance(outcome, Completed) and outcome.text == "charged"
    assert cancelled == outcome  # a finished run is not cancelled: its outcome is told again


def test_a_cancelled_aresume_run_stops_the_wait_and_the_run_goes_on(tmp_path: Path) -> None:
    async def main() -> Any:
        async with agent_waiting_on_a_key(tmp_path / "runs.sqlite") as agent:
            run_id, key = await waiting(agent)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0):  # cancels the task once it waits
                    await agent.aresume_run(run_id)
            assert await agent.aresolve(key, ok={"status": "paid"}) == "accepted"
            return await agent.aresume_run(run_id)

    assert isinstance(asyncio.run(main()), Completed)


def test_acancel_run_ends_a_waiting_run_and_every_wait_on_it_hears(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.sqlite")

    async def main() -> tuple[Any, Any, str]:
        async with agent_waiting_on_a_key(store) as agent:
            run_id, key = await waiting(agent)
            waiter = asyncio.ensure_future(agent.aresume_run(run_id))
            await asyncio.sleep(0)  # one pass of the loop: the waiter attaches before the cancel
            return await agent.acancel_run(run_id), await waiter, key

    try:
        cancelled, seen, key = asyncio.run(main())
        assert isinstance(cancelled, Halted) and cancelled.reason == "cancelled"
        assert seen == cancelled
        resolution = store.resolution(key)
        assert resolution is not None and resolution.kind == "cancelled"
    finally:
        store.close()


def test_a_wait_given_up_before_the_orchestrator_answers_troubles_no_run(tmp_path: Path) -> None:
    """The reply future is the orchestrator's to set: a cancelled wait cannot cancel it first
    (which made the orchestrator's answer fail, logged as a crashed run)."""

    async def main(agent: Agent) -> None:
        for _ in range(20):
            with pytest.raises((TimeoutError, UnknownRunError)):
                async with asyncio.timeout(0):
                    await agent.aresume_run("no-such-run")

    with capture_events() as events, agent_waiting_on_a_key(tmp_path / "runs.sqlite") as agent:
        asyncio.run(main(agent))
        with pytest.raises(UnknownRunError):
            agent.resume_run("no-such-run")  # after the twenty: the orchestrator answered them
    assert [e for e in events if e["event"] == "run_crashed"] == []


@pytest.mark.parametrize("twin", ["aresume_run", "acancel_run", "aresolve"])
def test_the_durable_twins_need_a_store_and_say_so(twin: str) -> None:
    async def main(agent: Agent) -> None:
        await getattr(agent, twin)("run-or-key")

    with Agent(ScriptedModel([])) as agent, pytest.raises(DurableError) as refused:
        asyncio.run(main(agent))
    assert refused.value.code == "store_required"
    assert f"{twin} needs a run store" in str(refused.value)


def test_aclose_closes_the_agent() -> None:
    async def main() -> None:
        agent = Agent(ScriptedModel(["hi"]))
        assert isinstance(await agent.arun("hello"), Completed)
        await agent.aclose()
        with pytest.raises(RuntimeError, match="this Agent is closed"):
            await agent.arun("again")
        await agent.aclose()  # idempotent, as close() is

    asyncio.run(main())
