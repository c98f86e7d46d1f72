"""One run that shows every kind of event: a crash, a timeout, a tool retry, a tool's progress,
a model retry, a question for the user and the resume that answers it; and a run left
waiting."""

from __future__ import annotations

from typing import Any

from toolvisor import Agent, AskUser, CallContext, Completed, ModelError, Suspended, function_tool
from toolvisor.machine import RetryPolicy
from toolvisor.testing import ScriptedModel, call, calls


@function_tool
def crash() -> str:
    """Crashes."""
    raise ConnectionError("backend down")


@function_tool(timeout=0.05)
def slow(ctx: CallContext) -> str:
    """Runs past its timeout (and stops when cancelled)."""
    ctx.cancelled.wait()
    return "late"


@function_tool(retryable=True)
def flaky(ctx: CallContext) -> str:
    """Reports its progress, and crashes on its first attempt."""
    ctx.report_progress("trying", 0.5)
    if ctx.attempt == 1:
        raise TimeoutError("first try fails")
    return "second try works"


@function_tool
def ask() -> AskUser:
    """Asks the user."""
    return AskUser("Go ahead?", ("yes", "no"))


def observed_run(**agent_options: Any) -> Completed:
    """Run it to the end: suspend on the question, resume with ``yes``."""
    model = ScriptedModel([
        ModelError("rate_limited", "slow down", retry_after=0.0),
        calls(call("crash", id="c"), call("slow", id="s"), call("flaky", id="f"),
              call("ask", id="a")),
        "done",
    ])
    policy = RetryPolicy(max_attempts=2, base_delay=0, jitter=0)
    with Agent(model, [crash, slow, flaky, ask], on_tool_error=policy,
               **agent_options) as agent:
        first = agent.run("go")
        assert isinstance(first, Suspended)
        outcome = agent.resume(first, "yes")
    assert isinstance(outcome, Completed)
    return outcome


def waiting_run() -> Suspended:
    """A run that asks the user and is left waiting for the answer."""
    with Agent(ScriptedModel([calls(call("ask", id="a"))]), [ask]) as agent:
        outcome = agent.run("ask me")
    assert isinstance(outcome, Suspended)
    return outcome
