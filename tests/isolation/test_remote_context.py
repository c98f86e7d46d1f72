"""The whole call context out of process: state, completion keys, durable effects and the
cancel token are served by the agent to a worker process or a Ray task, with the guarantees
they have in process. Every test runs under both isolations."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.support import remote_handlers as rh
from tests.support.events import Events
from toolvisor import (
    Agent,
    CallContext,
    Completed,
    Err,
    Ok,
    Suspended,
    Tool,
    ToolCall,
    ToolError,
    Tracing,
)
from toolvisor.contract import CapabilityError, ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.durable import DurableEffects, SqliteRunStore
from toolvisor.executor import ToolRunner
from toolvisor.isolation import RunningCall, prepare_process_isolation
from toolvisor.testing import FunctionModel, call, calls


@pytest.fixture(scope="module", autouse=True)
def _process_helpers() -> None:
    prepare_process_isolation()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.sqlite", poll_interval=0.01) as opened:
        opened.create_run("run-1")  # for the calls run without an agent
        yield opened


@pytest.fixture(params=["process", "ray"])
def isolation(request: pytest.FixtureRequest, ray_cluster: ModuleType) -> str:
    """Where the handlers run; ``ray`` on the session's cluster (started before any test's
    leak snapshot, whichever isolation it runs)."""
    return str(request.param)


@pytest.fixture
def runner(isolation: str) -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=20.0, process_workers=1) as opened:
        yield opened


@pytest.fixture
def in_worker(isolation: str) -> Callable[..., Tool]:
    def build(handler: Any, name: str = "remote", **options: Any) -> Tool:
        return Tool(name=name, handler=handler, isolation=isolation, **options)  # type: ignore[arg-type]
    return build


def journaled_ctx(store: SqliteRunStore, call_id: str) -> CallContext:
    """The context the host gives a durable call (here without an agent around it)."""
    return CallContext(session_id="run-1", tool_call=ToolCall(id=call_id, name="remote"),
                       durable=DurableEffects(store, "run-1", call_id))


def test_a_journaled_step_runs_in_the_worker_once_and_replays_from_the_journal(
        in_worker: Callable[..., Tool], runner: ToolRunner, store: SqliteRunStore,
        tmp_path: Path) -> None:
    """A second execution of the call (a restarted agent replaying it) gets the record."""
    log = tmp_path / "side-effects.log"
    first = runner.run(in_worker(rh.journals), {"log": str(log)}, journaled_ctx(store, "c1"))
    again = runner.run(in_worker(rh.journals), {"log": str(log)}, journaled_ctx(store, "c1"))
    assert isinstance(first, Ok) and isinstance(again, Ok)
    assert first.value["pid"] != os.getpid()
    assert first.value["charged"] == again.value["charged"] == 42
    assert first.value["seq"] == again.value["seq"]  # the process event was recorded once
    assert log.read_text().splitlines() == ["charge"]
    assert [e.type for e in store.process_events()] == ["charged"]


def test_a_step_that_raises_in_the_worker_raises_there_and_journals_nothing(
        in_worker: Callable[..., Tool], runner: ToolRunner, store: SqliteRunStore) -> None:
    result = runner.run(in_worker(rh.journals_a_failure), {}, journaled_ctx(store, "c2"))
    assert result == Ok({"caught": "card declined"})
    assert store.journal_record("run-1", "c2", "charge") is None


def test_a_request_made_inside_a_step_is_served_inside_it(
        in_worker: Callable[..., Tool], runner: ToolRunner, store: SqliteRunStore) -> None:
    from toolvisor.machine import StateView  # noqa: PLC0415

    ctx = journaled_ctx(store, "c3")
    ctx = CallContext(session_id=ctx.session_id, tool_call=ctx.tool_call, durable=ctx.durable,
                      state=StateView({"city": "Lyon"}))
    assert runner.run(in_worker(rh.nested_step), {}, ctx) == Ok("Lyon")


def test_without_a_store_the_worker_gets_the_same_capability_errors(
        in_worker: Callable[..., Tool], runner: ToolRunner) -> None:
    result = runner.run(in_worker(rh.journals), {"log": "unused"})
    assert result.reason.reason == "handler_raised"  # type: ignore[union-attr]
    cause = result.reason.cause  # type: ignore[union-attr]
    assert isinstance(cause, CapabilityError) and cause.code == "durable_effects_unavailable"


def test_the_cancel_token_is_served_and_a_cancel_reaches_the_worker(
        in_worker: Callable[..., Tool], runner: ToolRunner) -> None:
    """``ctx.cancelled.wait()`` in the worker returns when the agent's token is set."""
    done: list[Any] = []
    finished = threading.Event()
    handle = runner.start(in_worker(rh.waits_for_cancel), {}, None,
                          lambda result: (done.append(result), finished.set()))
    handle.cancel()
    assert finished.wait(10)
    assert done[0].reason.code == "cancelled"


def answers(request: ModelRequest) -> dict[str, str]:
    """The text of every tool result the model has seen, by call id."""
    return {m.tool_call_id: m.content for m in request.messages
            if isinstance(m, ToolResultMessage)}


def test_state_writes_and_reads_from_a_worker_land_in_the_run(
        in_worker: Callable[..., Tool], store: SqliteRunStore) -> None:
    def respond(request: ModelRequest) -> ModelResponse:
        seen = answers(request)
        if len(seen) < 2:
            return calls(call("remote", {}, id=f"c{len(seen) + 1}"))
        return ModelResponse(text="done")

    with Agent(FunctionModel(respond), [in_worker(rh.uses_state)], store=store) as agent:
        outcome = agent.run("go", state={"visits": 1}, wait_for=30)
    assert isinstance(outcome, Completed), outcome
    assert outcome.state["visits"] == 3
    assert outcome.state["worker_pid"] != os.getpid()


def test_a_worker_takes_a_completion_key_and_the_run_waits_for_it(
        in_worker: Callable[..., Tool], store: SqliteRunStore, tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"

    def respond(request: ModelRequest) -> ModelResponse:
        seen = answers(request)
        if not seen:
            return calls(call("hook", {"log": str(log)}, id="c1"))
        return ModelResponse(text=seen["c1"])

    with Agent(FunctionModel(respond), [in_worker(rh.parks, name="hook")],
               store=store) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended), suspended
        assert agent.resolve(suspended.keys["c1"], ok={"paid": True}) == "accepted"
        assert suspended.run_id is not None
        outcome = agent.resume_run(suspended.run_id, wait_for=30)
    assert isinstance(outcome, Completed), outcome
    assert json.loads(outcome.text) == {"paid": True}
    assert log.read_text().splitlines() == ["register"]


def test_an_external_event_awaited_in_a_worker_is_delivered(
        in_worker: Callable[..., Tool], store: SqliteRunStore, tmp_path: Path) -> None:
    fifo = tmp_path / "keys"
    os.mkfifo(fifo)

    def respond(request: ModelRequest) -> ModelResponse:
        seen = answers(request)
        if not seen:
            return calls(call("approve", {"fifo": str(fifo)}, id="c1"))
        return ModelResponse(text=seen["c1"])

    def deliver() -> None:
        with open(fifo, encoding="utf-8") as keys:  # blocks until the handler writes its key
            store.resolve(keys.read(), ok="approved")

    with Agent(FunctionModel(respond), [in_worker(rh.awaits_event, name="approve")],
               store=store) as agent:
        resolver = threading.Thread(target=deliver)
        resolver.start()
        outcome = agent.run("go", wait_for=30)
        resolver.join()
    assert isinstance(outcome, Completed), outcome
    assert outcome.text == "approved"


def test_a_worker_that_dies_inside_a_step_is_handler_exit_and_journals_nothing(
        in_worker: Callable[..., Tool], runner: ToolRunner, store: SqliteRunStore,
        tmp_path: Path) -> None:
    result = runner.run(in_worker(rh.dies_inside_a_step), {}, journaled_ctx(store, "c4"))
    assert result.reason.reason == "handler_exit"  # type: ignore[union-attr]
    assert store.journal_record("run-1", "c4", "charge") is None
    log = tmp_path / "after.log"  # the replacement worker serves the next call's context
    assert runner.run(in_worker(rh.journals), {"log": str(log)},
                      journaled_ctx(store, "c5")).value["charged"] == 42  # type: ignore[union-attr]


def test_a_deadline_ends_an_await_the_agent_serves_for_a_worker(
        in_worker: Callable[..., Tool], runner: ToolRunner, store: SqliteRunStore,
        tmp_path: Path) -> None:
    fifo = tmp_path / "keys"
    os.mkfifo(fifo)
    keys: list[str] = []
    reader = threading.Thread(target=lambda: keys.append(fifo.read_text()))
    reader.start()
    over = threading.Event()  # set when the call is over, as the host does: the await ends
    ctx = CallContext(session_id="run-1", tool_call=ToolCall(id="c6", name="remote"),
                      durable=DurableEffects(store, "run-1", "c6", cancelled=over))
    result = runner.run(in_worker(rh.awaits_event, timeout=1.5), {"fifo": str(fifo)}, ctx)
    over.set()
    with contextlib.suppress(OSError):  # a handler that never opened the FIFO (a worker too
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # slow to start): free the reader
    reader.join()
    assert result.reason.reason == "timeout"  # type: ignore[union-attr]
    assert keys and keys[0], "the handler did not reach its await before the deadline"


def traced_run(tool: Tool) -> tuple[Any, dict[str, ReadableSpan]]:
    """One call of ``tool`` in a traced run: what the tool said, and the spans by name."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = FunctionModel(lambda request: calls(call(tool.name, {}, id="c1")) if not answers(
        request) else ModelResponse(text=answers(request)["c1"]))
    with Agent(model, [tool], tracing=Tracing(provider=provider)) as agent:
        outcome = agent.run("go", wait_for=30)
    provider.shutdown()
    assert isinstance(outcome, Completed), outcome
    return json.loads(outcome.text), {s.name: s for s in exporter.get_finished_spans()}


def test_the_calls_span_is_current_in_the_worker(in_worker: Callable[..., Tool]) -> None:
    """The trace context crosses: the worker's current span is the call's ``execute_tool``."""
    seen, spans = traced_run(in_worker(rh.trace_ids, name="traced"))
    context = spans["execute_tool traced"].context
    assert context is not None
    assert seen == {"trace_id": format(context.trace_id, "032x"),
                    "span_id": format(context.span_id, "016x")}


def test_a_thread_a_call_left_behind_cannot_reach_the_next_calls_context() -> None:
    """A worker process runs call after call: each request names its call (a Ray task's link
    is its own connection, closed when the task returns)."""
    from toolvisor.machine import StateView  # noqa: PLC0415

    def in_process(handler: Any) -> Tool:
        return Tool(name="remote", handler=handler, isolation="process")

    with ToolRunner(tool_timeout=20.0, process_workers=1) as runner:
        first = CallContext(state=StateView({"city": "Lyon"}))
        assert runner.run(in_process(rh.leaves_a_thread), {}, first) == Ok("left a thread")
        second = CallContext(state=StateView({"city": "Oslo"}))
        assert runner.run(in_process(rh.what_the_thread_got), {}, second) == Ok("call_finished")


def waiting_call(ctx: CallContext) -> RunningCall:
    return RunningCall(Tool(name="t"), {}, ctx, token=threading.Event(), timeout=1.0,
                       on_done=lambda result: None)


def test_a_ray_link_serves_only_a_peer_that_holds_the_runners_key(events: Events) -> None:
    """The handshake before anything is unpickled: the right key is served, a wrong key or
    garbage is refused, an unknown call gets nothing."""
    from toolvisor.isolation._link._remote_context import ContextLink  # noqa: PLC0415
    from toolvisor.isolation._ray._links import LinkAddress, RayContextLinks  # noqa: PLC0415
    from toolvisor.machine import StateView  # noqa: PLC0415

    links = RayContextLinks("127.0.0.1")
    try:
        address = links.address_for(waiting_call(CallContext(state=StateView({"a": 1}))), 7)
        link = ContextLink(address.connect)
        assert link.ask(7, "state", "get", "a") == 1
        with pytest.raises(CapabilityError, match="call_finished"):
            link.ask(8, "state", "get", "a")  # another call's tag
        link.close()

        forged = LinkAddress(address.host, address.port, b"x" * 32, address.token)
        with pytest.raises(ConnectionError, match="failed the challenge"):
            forged.connect()
        with socket.create_connection((address.host, address.port)) as raw:
            raw.sendall(b"\0\0\0\x20" + b"g" * 32)  # a challenge, then a bad proof
            raw.recv(4096)
            raw.sendall(b"\0\0\0\x40" + b"h" * 64)
            assert raw.recv(4096) == b""  # refused: closed without a word
        # Each refusal is logged by its link's thread: the forged peer's once that thread
        # reads the end of a connection the peer already left.
        assert len(events.wait_for_count("ray_link_refused", 2)) == 2

        unknown = LinkAddress(address.host, address.port, address.authkey, "no-such-call")
        link = ContextLink(unknown.connect)
        with pytest.raises(CapabilityError, match="call_finished"):
            link.ask(7, "state", "get", "a")
        link.close()
    finally:
        links.close()


def test_a_steps_own_os_error_is_its_error_not_a_closed_link(
        in_worker: Callable[..., Tool], runner: ToolRunner, store: SqliteRunStore,
        tmp_path: Path) -> None:
    result = runner.run(in_worker(rh.step_raises_os_error), {"path": str(tmp_path / "none")},
                        journaled_ctx(store, "c7"))
    assert result == Ok({"caught": "FileNotFoundError"})
    log = tmp_path / "after.log"  # the same worker's link still serves the next call
    assert runner.run(in_worker(rh.journals), {"log": str(log)},
                      journaled_ctx(store, "c8")).value["charged"] == 42  # type: ignore[union-attr]


def test_the_spans_a_handler_makes_in_the_worker_reach_the_agents_trace(
        in_worker: Callable[..., Tool]) -> None:
    """Made in the agent's trace, under the call's span, with the ids the worker saw."""
    seen, spans = traced_run(in_worker(rh.makes_spans, name="spans"))
    assert seen["pid"] != os.getpid()
    call_span, lookup, inner = spans["execute_tool spans"], spans["lookup"], spans["inner"]
    assert lookup.parent is not None and call_span.context is not None
    assert lookup.parent.span_id == call_span.context.span_id
    assert inner.parent is not None and lookup.context is not None
    assert inner.parent.span_id == lookup.context.span_id
    assert inner.context is not None and format(inner.context.span_id, "016x") == seen["inner"]
    assert dict(lookup.attributes or {}) == {"table": "cities", "rows": 3}
    assert [e.name for e in lookup.events] == ["cache_miss"]
    assert inner.status.status_code == StatusCode.ERROR and inner.status.description == "slow"


def test_the_ray_links_listen_where_the_environment_says(
        ray_cluster: ModuleType, store: SqliteRunStore, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``TOOLVISOR_RAY_LINK_HOST``: an address the workers reach is used; one this machine
    does not have fails the call with an error that names the setting."""
    tool = Tool(name="remote", handler=rh.journals, isolation="ray")
    monkeypatch.setenv("TOOLVISOR_RAY_LINK_HOST", "127.0.0.1")
    with ToolRunner(tool_timeout=20.0) as runner:
        result = runner.run(tool, {"log": str(tmp_path / "log")}, journaled_ctx(store, "c9"))
    assert isinstance(result, Ok) and result.value["charged"] == 42
    monkeypatch.setenv("TOOLVISOR_RAY_LINK_HOST", "192.0.2.1")  # TEST-NET-1: not ours
    with ToolRunner(tool_timeout=20.0) as runner:
        refused = runner.run(tool, {"log": str(tmp_path / "log")}, journaled_ctx(store, "c10"))
    assert isinstance(refused, Err) and isinstance(refused.reason, ToolError)
    assert (refused.reason.reason, refused.reason.code) == ("handler_exit", "not_started")
    assert "TOOLVISOR_RAY_LINK_HOST" in refused.reason.message
