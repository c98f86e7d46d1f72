"""The agent factory of the worker tests: ``python -m toolvisor.cli worker --store S
tests.programs.worker_app:make_agent``.

A run's prompt names the one tool its model calls, then the model answers with what the tool
returned. ``echo`` answers at once; ``hook`` takes a completion key and waits on it (the run is
let go until a resolution; with ``TOOLVISOR_TEST_STEPS`` set, it appends ``hook`` to that
file); ``delegate`` runs the prompt ``hook`` as a child session on the same agent and waits on
the child's key (``ctx.sessions.relay``); ``block`` prints ``blocking RUN_ID`` and, in a worker
started with ``TOOLVISOR_TEST_BLOCK=1``, waits until its call is cancelled (the worker stops)
or the process is killed; elsewhere it answers at once (retryable: a worker that takes the run
over runs it again). ``once`` is ``block`` not retryable: a call cut short is not run again.
``TOOLVISOR_TEST_LEASE_TTL`` sets the lease's time to live (seconds).
"""

from __future__ import annotations

import os
from typing import Any

from toolvisor import Agent, AskUser, CallContext, Durability, Ok, Pending, Suspended, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from toolvisor.durable import RunStore
from toolvisor.testing import FunctionModel, call, calls


def echo(arguments: dict[str, Any]) -> Ok:
    return Ok(f"echo {arguments['text']}")


def hook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
    if steps := os.environ.get("TOOLVISOR_TEST_STEPS"):
        with open(steps, "a", encoding="utf-8") as out:
            out.write("hook\n")
    ctx.completion_key()
    return Pending(deadline=600)


def delegate(arguments: dict[str, Any], ctx: CallContext) -> Ok | AskUser | Pending:
    assert ctx.sessions is not None
    outcome = ctx.sessions.start_turn("hook")
    return ctx.sessions.relay(outcome) if isinstance(outcome, Suspended) else Ok(outcome.text)


def block(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    print(f"blocking {arguments['run']}", flush=True)
    if os.environ.get("TOOLVISOR_TEST_BLOCK") == "1":
        ctx.cancelled.wait()
    return Ok("unblocked")


TOOLS = [Tool("echo", handler=echo), Tool("hook", handler=hook),
         Tool("delegate", handler=delegate),
         Tool("block", handler=block, retryable=True), Tool("once", handler=block)]


def respond(request: ModelRequest) -> ModelResponse:
    """Call the tool the prompt names (its words after the first are its argument), then say
    what it returned."""
    results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    if results:
        return ModelResponse(text=f"it said {results[-1]}")
    prompt = next(m.content for m in request.messages if isinstance(m, UserMessage))
    tool, _, rest = str(prompt).partition(" ")
    argument = {"block": {"run": rest}, "once": {"run": rest}, "echo": {"text": rest}}.get(
        tool, {})
    return calls(call(tool, argument, id=f"c_{tool}"))


def make_agent(store: RunStore) -> Agent:
    ttl = float(os.environ.get("TOOLVISOR_TEST_LEASE_TTL", "30"))
    return Agent(FunctionModel(respond), TOOLS,
                 durability=Durability(store=store, lease_ttl=ttl))


def not_an_agent(store: RunStore) -> str:
    return "an agent"
