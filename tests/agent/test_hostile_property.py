"""Property: whatever hostile input one run gets, every other run of the agent ends as it would
have alone, and nothing is left behind (the suite's leak check runs after the test)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.runs import nested
from toolvisor import Agent, AskUser, Completed, Ok, Suspended, Tracing, tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from toolvisor.durable import SignatureError
from toolvisor.machine import CallAttempt, ContinueRun
from toolvisor.testing import FunctionModel, call, calls

HOSTILE = ("deep_args", "huge_args", "raising_policy", "invalid_return", "unencodable_result",
           "raising_progress", "forged_resume", "bad_answers")


ANY_OBJECT = {"type": "object"}  # every hostile argument reaches the tools: open on purpose


@tool(input_schema=ANY_OBJECT)
def echo(arguments: dict[str, Any]) -> Ok:
    """Echoes."""
    return Ok(arguments)


@tool(input_schema=ANY_OBJECT)
def crash(arguments: dict[str, Any]) -> Ok:
    """Crashes."""
    raise RuntimeError("crash")


@tool(input_schema=ANY_OBJECT)
def bad_return(arguments: dict[str, Any]) -> Any:
    """Returns what no handler may."""
    return 42


@tool(input_schema=ANY_OBJECT)
def unencodable(arguments: dict[str, Any]) -> Ok:
    """Returns what JSON cannot hold."""
    return Ok(object())


@tool(input_schema=ANY_OBJECT)
def approve(arguments: dict[str, Any]) -> AskUser:
    """Asks a human."""
    return AskUser("approve?")


HOSTILE_CALLS = {
    "deep_args": call("echo", nested(400)),
    "huge_args": call("echo", {"blob": "x" * 2_000_000}),
    "raising_policy": call("crash"),
    "invalid_return": call("bad_return"),
    "unencodable_result": call("unencodable"),
    "raising_progress": call("echo", {"n": 0}),
    "forged_resume": call("approve", id="q1"),
    "bad_answers": call("approve", id="q1"),
}


def respond(request: ModelRequest) -> ModelResponse:
    prompt = request.messages[0]
    assert isinstance(prompt, UserMessage)
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    if results:
        return ModelResponse(text=f"{prompt.content}: {len(results)} result(s)")
    if prompt.content.startswith("normal"):
        return calls(call("echo", {"n": prompt.content}))
    return calls(HOSTILE_CALLS[prompt.content])


def policy(failed: CallAttempt, error: Any) -> ContinueRun:
    if failed.name == "crash":
        raise ValueError("a policy with a bug")
    return ContinueRun()


async def drive_all(agent: Agent, kind: str, normal: int) -> tuple[Any, list[Any]]:
    async def hostile() -> Any:
        if kind in ("forged_resume", "bad_answers"):
            suspended = await agent.arun(kind)
            assert isinstance(suspended, Suspended)
            if kind == "forged_resume":
                data = json.loads(suspended.model_dump_json())
                data["checkpoint"]["run"]["calls"][0]["call"]["arguments"] = {"sneaky": True}
                forged = Suspended.model_validate(data)
                return await asyncio.to_thread(agent.resume, forged, "yes")
            return await asyncio.to_thread(agent.resume, suspended, {"wrong_id": "yes"})
        return await agent.arun(kind)

    outcomes = await asyncio.gather(hostile(), *(agent.arun(f"normal {i}")
                                                 for i in range(normal)),
                                    return_exceptions=True)
    return outcomes[0], list(outcomes[1:])


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(HOSTILE), normal=st.integers(min_value=2, max_value=5))
def test_one_hostile_run_never_touches_the_others(kind: str, normal: int) -> None:
    def on_progress(run_id: str, event: str, data: dict[str, Any]) -> None:
        if kind == "raising_progress":
            raise RuntimeError("a progress callback with a bug")

    tools = [echo, crash, bad_return, unencodable, approve]
    with Agent(FunctionModel(respond), tools, on_tool_error=policy,
               tracing=Tracing(on_progress=on_progress)) as agent:
        hostile, others = asyncio.run(drive_all(agent, kind, normal))
    assert [o.text if isinstance(o, Completed) else o for o in others] == [
        f"normal {i}: 1 result(s)" for i in range(normal)]
    if kind in ("forged_resume",):
        assert isinstance(hostile, SignatureError)
    elif kind == "bad_answers":
        assert isinstance(hostile, ValueError)
    else:
        assert not isinstance(hostile, BaseException), hostile
