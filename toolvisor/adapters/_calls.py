"""``SupervisedCalls``: one tool call at a time under toolvisor's supervision, for a loop that
is not toolvisor's (pydantic-ai, LangGraph, the OpenAI Agents SDK).

Each call runs in its own ``ToolCallActor`` under a ``DynamicSupervisor``, through a
``ToolRunner``: the tool's isolation and timeout apply (a hung ``process`` tool is killed at
its deadline), and whatever goes wrong is one reason of the closed set. In front of it stand
the tool's breaker, bulkhead and rate limit; around it, with a tracer provider, its span.
With a run store a finished call is recorded by its ``tool_call_id`` and replayed when
the framework asks for it again, and a call may take a completion key and return ``Pending``.
The adapters map what comes back onto their framework's channels.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolvisor._logging import get_event_log
from toolvisor.actors import CallReply, ToolCallDispatcher
from toolvisor.adapters._gates import GateKeeper, ResilienceConfig, refused
from toolvisor.adapters._journal import CallJournal
from toolvisor.adapters._tracing import CallSpan, CallTracing
from toolvisor.call import encode_checked
from toolvisor.contract import (
    AskUser,
    CallContext,
    Err,
    HandlerResult,
    InvalidArguments,
    Ok,
    Pending,
    ProgressSink,
    Tool,
    ToolCall,
    ToolError,
    function_tool,
)
from toolvisor.durable import RunStore
from toolvisor.executor import RunnerStats, ToolRunner
from toolvisor.supervisors import DynamicSupervisor

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider
    from pykka import ActorRef

_log = get_event_log("adapter")


@dataclass(frozen=True, slots=True)
class Finished:
    """What one supervised call came back with.

    ``result`` is the handler's result (a crash, a timeout or a refusal is an
    ``Err(ToolError)``), ``text`` its encoding for the model, ``completion_key`` the key a
    ``Pending`` call took (parked in the store), ``replayed`` whether it came from the
    journal instead of running, ``resumes`` how many of the framework's resume values the
    call took before it finished (recorded with it, with a store).
    """

    tool_call_id: str
    tool_name: str
    result: HandlerResult
    text: str
    completion_key: str | None = None
    replayed: bool = False
    resumes: int = 0


class SupervisedCalls:
    """Runs single calls of ``tools`` (toolvisor ``Tool``s, or plain typed functions, which
    ``function_tool`` turns into ones) under toolvisor's runner and supervision.

    ``tool_timeout`` is the deadline of a tool without its own; ``resilience`` one
    ``Resilience`` for every tool or one per tool name; ``store`` (with ``run_id``, the run
    its records belong to) records finished calls for replay and gives calls completion keys;
    ``tracer_provider`` an OpenTelemetry provider for one span per call. Safe to use from
    several threads and event loops at once. ``close()`` stops the calls' supervisor, the
    runner (worker processes included) and the gates' timer. ``supervisor_name`` names the
    calls' supervisor in events.
    """

    def __init__(self, tools: Sequence[Tool | Callable[..., Any]], *,
                 tool_timeout: float = 30.0, process_workers: int = 2,
                 resilience: ResilienceConfig = None,
                 resilience_clock: Callable[[], float] = time.monotonic,
                 store: RunStore | None = None, run_id: str | None = None,
                 tracer_provider: TracerProvider | None = None,
                 max_concurrent_calls: int = 1024,
                 supervisor_name: str = "adapter_calls") -> None:
        self.tools = _tools_by_name(tools)
        if (store is None) != (run_id is None):
            raise ValueError("give store and run_id together: the store records the calls of "
                             "the run run_id names (e.g. the framework's thread or session id)")
        self._journal = None if store is None or run_id is None else CallJournal(store, run_id)
        self._gates = GateKeeper(resilience, clock=resilience_clock)
        self._tracing = None if tracer_provider is None else CallTracing(tracer_provider)
        self._runner = ToolRunner(tool_timeout=tool_timeout, process_workers=process_workers)
        self._calls = DynamicSupervisor.start(max_children=max_concurrent_calls,
                                               name=supervisor_name)
        self._dispatcher = ToolCallDispatcher(self._calls, self._runner)

    @property
    def journal(self) -> CallJournal | None:
        """The store's records of this adapter's calls, if it has a store."""
        return self._journal

    @property
    def stats(self) -> RunnerStats:
        """The runner's counters (``workers_killed``: hung ``process`` tools it killed)."""
        return self._runner.stats

    def run(self, tool_name: str, arguments: Mapping[str, Any] | str, tool_call_id: str
            ) -> Finished:
        """Run one call and block until it finishes (or is replayed, or refused).

        ``arguments`` are the model's, parsed or as JSON text (text that is no JSON object
        ends the call ``invalid_arguments``)."""
        call = self._before(tool_name, arguments, tool_call_id)
        if isinstance(call, Finished):
            return call
        tool = self.tools[tool_name]
        ticket, admission = self._gates.arrive(tool_name)
        refusal = admission.result()
        if refusal is not None:
            return self._done(tool_name, tool_call_id, refused(tool_name, tool_call_id, refusal))
        replied, _ = self._start(tool, call, ticket)
        return replied.result()

    async def arun(self, tool_name: str, arguments: Mapping[str, Any] | str,
                   tool_call_id: str, *, progress: ProgressSink | None = None) -> Finished:
        """Run one call, as :meth:`run`; cancelling the awaiting task stops the call's actor
        (the call ends ``handler_exit``, code ``cancelled``). ``progress`` gets the call's
        ``ctx.report_progress`` reports."""
        call = self._before(tool_name, arguments, tool_call_id)
        if isinstance(call, Finished):
            return call
        tool = self.tools[tool_name]
        ticket, admission = self._gates.arrive(tool_name)
        try:
            refusal = await asyncio.wrap_future(admission)
        except asyncio.CancelledError:
            self._gates.withdraw(tool_name, ticket)
            raise
        if refusal is not None:
            return self._done(tool_name, tool_call_id, refused(tool_name, tool_call_id, refusal))
        replied, actor = self._start(tool, call, ticket, progress)
        try:
            return await asyncio.wrap_future(replied)
        except asyncio.CancelledError:
            if actor is not None:
                actor.stop(block=False)
            raise

    def answer(self, tool_name: str, tool_call_id: str, answer: Ok | Err, *,
               resumes: int = 0) -> Finished:
        """The result of a call that asked a question, given its ``answer`` (recorded for
        replay, with a store); ``resumes``: how many resume values the framework gave the
        question, this one included (LangGraph's, whose replay takes as many)."""
        checked, text = encode_checked(answer, tool_name=tool_name, tool_call_id=tool_call_id)
        if self._journal is not None:
            self._journal.record(tool_call_id, tool_name, {"answer": True}, checked, text,
                                 resumes=resumes)
        return Finished(tool_call_id, tool_name, checked, text, resumes=resumes)

    def settle(self, tool_name: str, tool_call_id: str, key: str, *,
               resumes: int = 0) -> Finished | None:
        """The result of a ``Pending`` call once its completion key is resolved (recorded
        for replay, with the ``resumes`` it waited through), or ``None`` while it waits; past
        its deadline, ``timeout``."""
        journal = self._require_journal("settle a pending call")
        replayed = journal.replay(tool_call_id)
        if replayed is not None and isinstance(replayed.result, Ok | Err):
            return Finished(tool_call_id, tool_name, replayed.result, replayed.text,
                            replayed=True, resumes=replayed.resumes)
        result = journal.settled(tool_call_id, key)
        if result is None:
            return None
        checked, text = encode_checked(result, tool_name=tool_name, tool_call_id=tool_call_id)
        journal.record(tool_call_id, tool_name, {"completion_key": key}, checked, text,
                       resumes=resumes)
        return Finished(tool_call_id, tool_name, checked, text, resumes=resumes)

    def close(self) -> None:
        """Stop the calls' supervisor, then the actors' threads, the runner and the gates.
        Idempotent."""
        try:
            self._calls.stop()
        finally:
            self._dispatcher.close()
            self._runner.close()
            self._gates.close()

    def __enter__(self) -> SupervisedCalls:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_journal(self, what: str) -> CallJournal:
        if self._journal is None:
            raise ValueError(f"to {what} the adapter needs a run store: give it store= "
                             "and run_id=")
        return self._journal

    def _before(self, tool_name: str, arguments: Mapping[str, Any] | str,
                tool_call_id: str) -> Finished | ToolCall:
        """What a call ends with before it runs (an unknown tool, a recorded result,
        arguments that are no JSON object), else the call to run."""
        if tool_name not in self.tools:
            return self._done(tool_name, tool_call_id, Err(ToolError(
                "not_found", f"tool error ({tool_name}): not_found: no tool named "
                f"{tool_name!r}; tools: {sorted(self.tools)}", tool_name=tool_name,
                tool_call_id=tool_call_id)))
        if self._journal is not None:
            recorded = self._journal.replay(tool_call_id)
            if recorded is not None:
                _log.info("call_replayed", tool_name=tool_name, tool_call_id=tool_call_id,
                          run_id=self._journal.run_id)
                return Finished(tool_call_id, tool_name, recorded.result, recorded.text,
                                completion_key=recorded.completion_key, replayed=True,
                                resumes=recorded.resumes)
        if isinstance(arguments, str):
            call = ToolCall(id=tool_call_id, name=tool_name, raw_arguments=arguments)
            violation = call.arguments_violation()
            if violation is not None:
                return self._done(tool_name, tool_call_id,
                                  Err(InvalidArguments(tool_name, [violation])))
            return call
        return ToolCall(id=tool_call_id, name=tool_name, arguments=dict(arguments))

    def _done(self, tool_name: str, tool_call_id: str, result: HandlerResult) -> Finished:
        checked, text = encode_checked(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return Finished(tool_call_id, tool_name, checked, text)

    def _start(self, tool: Tool, call: ToolCall, ticket: int | None,
               progress: ProgressSink | None = None
               ) -> tuple[Future[Finished], ActorRef[Any] | None]:
        """Start the call's actor; the future settles with its reply, once."""
        tool_call_id = call.id
        span = None if self._tracing is None else \
            self._tracing.start(tool.name, tool_call_id, tool.isolation or "default")
        ctx = CallContext(tool_call=call, trace_scope=None if span is None else span.scope,
                          progress=progress)
        journal = self._journal
        if journal is not None:
            ctx = dataclasses.replace(ctx, session_id=journal.run_id,
                                      completion_keys=journal.issuer(tool_call_id))
        replied: Future[Finished] = Future()

        def reply(outcome: CallReply) -> None:  # on an actor's or a runner's thread
            replied.set_result(self._finish(tool, call, ctx, (ticket, span), outcome))

        actor = self._dispatcher.start_call(tool, call, ctx, reply)
        return replied, actor

    def _finish(self, tool: Tool, call: ToolCall, ctx: CallContext,
                held: tuple[int | None, CallSpan | None], outcome: CallReply) -> Finished:
        """Count the outcome at the gate (``held``: its ticket and span), end the span,
        record or park the call."""
        ticket, span = held
        result = outcome.result
        self._gates.finish(tool.name, ticket, result)
        if span is not None:
            span.end(result, outcome.text)
        key = None
        journal = self._journal
        if journal is not None:
            if isinstance(result, Pending) and ctx.completion_keys is not None:
                key = ctx.completion_keys.issued
                if key is not None:
                    journal.park(key, result)
                    journal.record_waiting(call.id, tool.name, call.arguments, result,
                                           outcome.text, key=key)
            elif isinstance(result, AskUser):
                journal.record_waiting(call.id, tool.name, call.arguments, result,
                                       outcome.text)
            elif isinstance(result, Ok | Err):
                journal.record(call.id, tool.name, call.arguments, result, outcome.text)
        return Finished(call.id, tool.name, result, outcome.text, completion_key=key)


def _tools_by_name(tools: Sequence[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    if isinstance(tools, Tool) or not isinstance(tools, Sequence):
        raise TypeError(f"tools must be a sequence of toolvisor Tools or typed functions, got "
                        f"{type(tools).__name__}")
    by_name: dict[str, Tool] = {}
    for each in tools:
        if isinstance(each, Tool):
            made = each
        elif callable(each):
            made = function_tool(each)
        else:
            raise TypeError(f"each tool must be a toolvisor Tool or a typed function, got "
                            f"{each!r}")
        if made.handler is None:
            raise ValueError(f"tool {made.name!r} has no handler (a manual tool): an adapter "
                             "runs tools, give it one with a handler")
        if made.name in by_name:
            raise ValueError(f"two tools are named {made.name!r}; tool names must be unique")
        by_name[made.name] = made
    return by_name
