"""A finished call leaves no reference cycle behind: its actor, supervision link, runner call,
deadline and context are freed by reference counting as soon as the call ends, instead of
waiting for the garbage collector (whose full collections grow with everything a busy process
holds, and stop every thread meanwhile)."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest

from toolvisor import Agent, Completed, Ok, Tool, ToolCall
from toolvisor.actors import ToolCallDispatcher
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import DynamicSupervisor
from toolvisor.testing import ScriptedModel, call, calls

CALLS = 20
CALL_TYPES = {"ToolCallActor", "ChildLink", "RunningCall", "Deadline", "CallHandle",
              "CallContext", "CallTarget", "ParkingMailbox", "Liveness"}


def no_op(arguments: dict[str, object]) -> Ok:
    return Ok(None)


async def async_no_op(arguments: dict[str, object]) -> Ok:
    return Ok(None)


def call_cycles_left_by(body: Callable[[], None]) -> list[str]:
    """The call objects (by type) that only the collector could free once ``body`` ran, with
    the collector off meanwhile."""
    gc.collect()
    gc.disable()
    try:
        body()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return sorted({type(o).__name__ for o in gc.garbage
                       if CALL_TYPES & {t.__name__ for t in type(o).__mro__}})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("handler", [no_op, async_no_op], ids=["inline", "parked"])
def test_calls_through_the_dispatcher_leave_no_cycle(handler: Callable[..., object]) -> None:
    def dispatch() -> None:
        supervisor = DynamicSupervisor.start(max_children=CALLS, shutdown=1.0)
        with ToolRunner(tool_timeout=30.0) as runner, \
                ToolCallDispatcher(supervisor, runner) as dispatcher:
            outcomes = dispatcher.dispatch([(Tool(name="n", handler=handler),
                                             ToolCall(id=f"c{i}", name="n"), None)
                                            for i in range(CALLS)])
            assert all(isinstance(o.result, Ok) for o in outcomes)
        supervisor.stop()  # the dispatcher's close joined every actor's loop

    assert call_cycles_left_by(dispatch) == []


def test_a_turn_of_calls_leaves_no_cycle() -> None:
    def turn() -> None:
        model = ScriptedModel([calls(*(call("n") for _ in range(CALLS))), "done"])
        with Agent(model, [Tool(name="n", handler=no_op)]) as agent:
            assert isinstance(agent.run("go"), Completed)

    assert call_cycles_left_by(turn) == []
