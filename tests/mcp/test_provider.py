"""MCP servers as supervised tool sources, against real servers the tests start themselves.

Two streamable HTTP servers (``tests.programs.mcp_server --http``) serve the whole module, one on
the 2026-07-28 protocol and one (``--legacy``) on 2025-11-25, as the reference servers speak it;
each test connects its own agent to them. The tests that kill, restart or confuse a server
start servers of their own. Nothing sleeps: a test waits for an event, or reads a child's
output.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import reference_mcp as reference
from tests.support.events import Events
from tests.support.local_mcp import SERVER, stdio
from toolvisor import Agent, Completed, Limits, ToolError, function_tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.machine import CallAttempt, ContinueRun, Decision
from toolvisor.mcp import McpToolProvider
from toolvisor.supervisors import ChildStartError
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret"


def module_server(*flags: str) -> Iterator[str]:
    """A server for the module's tests; it tells its URL on its first line of output."""
    process = subprocess.Popen([*SERVER, "--http", "--token", TOKEN, *flags], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        assert line, f"the MCP server exited with {process.wait()}"
        yield str(json.loads(line)["url"])
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The module's HTTP server on the 2026-07-28 protocol."""
    yield from module_server()


@pytest.fixture(scope="module")
def legacy_url() -> Iterator[str]:
    """The module's HTTP server on the 2025-11-25 protocol (sessions with ids)."""
    yield from module_server("--legacy")


def http(url: str, **settings: Any) -> McpToolProvider:
    return McpToolProvider.http("web", url, headers={"Authorization": f"Bearer {TOKEN}"},
                                **settings)


class Recorder:
    """An ``on_tool_error`` policy that keeps what it saw and lets the run continue."""

    def __init__(self) -> None:
        self.errors: dict[str, Any] = {}

    def __call__(self, failed: CallAttempt, error: Any) -> Decision:
        self.errors[failed.call.id] = error
        return ContinueRun()


def results(outcome: Any) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in outcome.messages if isinstance(m, ToolResultMessage)}


def crash_of(error: Any) -> ToolError:
    assert isinstance(error, ToolError), error
    return error


@function_tool
def local() -> str:
    """A tool of the agent's own."""
    return "local ok"


def test_the_servers_tools_join_the_catalog_with_their_schemas(http_url: str) -> None:
    with Agent(ScriptedModel([]), [local, http(http_url)]) as agent:
        specs = {s.name: s for s in agent.registry.specs()}
        assert {"add", "echo", "boom", "local"} <= set(specs)
        assert specs["add"].input_schema["required"] == ["a", "b"]
        state = agent.registry.state()
        assert "add" in state.sources["mcp:web"].members
        assert [c.id for c in agent.supervisor.which_children()] == [
            "tool_calls", "processes", "mcp:web", "orchestrator"]


def test_calls_reports_and_crashes_are_told_apart(http_url: str) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("add", {"a": 2, "b": 3}, id="ok"),
                                 call("boom", {"why": "disk full"}, id="reported"),
                                 call("rpc_error", {}, id="rpc"),
                                 call("missing", {}, id="unknown")), "done"])
    with Agent(model, [http(http_url)], on_tool_error=policy) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Completed)
    assert results(outcome)["ok"].content == '{"result":5}'
    assert policy.errors["reported"] == "Error executing tool boom"  # isError: Err, untouched
    rpc = crash_of(policy.errors["rpc"])
    assert (rpc.reason, rpc.code) == ("handler_raised", "mcp_protocol_error")
    assert "-32099" in rpc.message
    assert crash_of(policy.errors["unknown"]).reason == "not_found"


def test_a_tool_added_at_run_time_reaches_a_later_model_request(http_url: str) -> None:
    # Over HTTP the server says its list changed on a stream of its own, apart from the call's
    # result: the change reaches the catalog when it arrives, the next request or the one
    # after (the model waits a turn meanwhile, as a model that does not see a tool would).
    offered: list[set[str]] = []

    def respond(request: ModelRequest) -> ModelResponse:
        offered.append({t.name for t in request.tools})
        if len(offered) == 1:
            return calls(call("grow", {}, id="g"))
        if "late" not in offered[-1]:
            return calls(call("echo", {"text": "wait"}, id=f"w{len(offered)}"))
        if sum("late" in tools for tools in offered) == 1:
            return calls(call("late", {"word": "hi"}, id="l"))
        return ModelResponse(text="done")

    with Agent(FunctionModel(respond), [http(http_url)], limits=Limits(turns=8)) as agent:
        generation = agent.registry.generation
        outcome = agent.run("go")
        assert agent.registry.generation > generation
    assert "late" not in offered[0] and "late" in offered[-1]
    assert results(outcome)["l"].content == '{"result":"HI"}'


def test_the_timeout_cancels_the_call_on_the_server(http_url: str) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("hang", {}, id="h")),
                           calls(call("was_cancelled", {}, id="w")), "done"])
    with Agent(model, [http(http_url, timeout=0.5)], on_tool_error=policy) as agent:
        outcome = agent.run("go")
    assert crash_of(policy.errors["h"]).reason == "timeout"
    assert results(outcome)["w"].content == '{"result":true}'


def test_a_request_without_the_token_cannot_connect(http_url: str) -> None:
    with pytest.raises(ChildStartError, match="mcp:web"):
        Agent(ScriptedModel([]), [McpToolProvider.http("web", http_url,
                                                           connect_timeout=10)])


def test_a_server_that_exits_mid_call_is_restarted(events: Events) -> None:
    policy = Recorder()
    model = ScriptedModel({
        "go": [calls(call("pid", {}, id="before")), calls(call("die", {}, id="d")), "waiting"],
        "again": [calls(call("pid", {}, id="after")), "done"]})
    with Agent(model, [stdio()], on_tool_error=policy) as agent:
        first = agent.run("go")
        events.wait_for("child_restarted", child_id="connection")
        second = agent.run("again")
    crash = crash_of(policy.errors["d"])
    assert (crash.reason, crash.code) == ("handler_exit", "mcp_transport_closed")
    pids = [json.loads(results(outcome)[call_id].content)["result"]
            for outcome, call_id in ((first, "before"), (second, "after"))]
    assert pids[0] != pids[1]
    for pid in pids:  # both servers are gone, and reaped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_server_that_keeps_dying_is_given_up_and_the_rest_goes_on(events: Events) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("echo", {"text": "x"}, id="gone"),
                                 call("local", {}, id="mine")), "done"])
    doomed = stdio("--doomed", max_restarts=2, max_seconds=120)
    with Agent(model, [local, doomed], on_tool_error=policy) as agent:
        events.wait_for("restart_intensity_exceeded", supervisor_id="mcp:local")
        events.wait_for("tool_source_orphaned", source="mcp:local")
        state = agent.registry.state()
        assert "mcp:local" not in state.sources
        assert state.orphans["mcp:local"].members == ("echo",)
        assert {s.name for s in agent.registry.specs()} == {"local"}
        outcome = agent.run("go")
        assert [c.id for c in agent.supervisor.which_children()] == [
            "tool_calls", "processes", "orchestrator"]
    assert crash_of(policy.errors["gone"]).reason == "not_found"
    assert results(outcome)["mine"].content == "local ok"


def test_the_sdk_is_an_extra_named_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("toolvisor.mcp._session", "toolvisor.mcp._transport"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ImportError, match=re.escape("pip install '.[mcp]' in toolvisor's clone")):
        McpToolProvider.stdio("x", ["true"])


def test_the_example_shows_a_crash_and_a_restart() -> None:
    shown = subprocess.run([sys.executable, "-m", "examples.mcp_tools"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert "crash failed -> crash: handler_exit (mcp_transport_closed)" in shown
    assert "[child_restarted] connection" in shown
    assert "run 2: {\"result\":\"Lima: 21 C, clear\"}" in shown


def serve_http(*flags: str) -> tuple[subprocess.Popen[str], str]:
    """An HTTP server of the test's own (it kills it); its URL from its first line."""
    process = subprocess.Popen([*SERVER, "--http", "--token", TOKEN, *flags], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the MCP server exited with {process.wait()}"
    return process, str(json.loads(line)["url"])


def port_of(url: str) -> str:
    return url.rsplit(":", 1)[1].split("/", maxsplit=1)[0]


def stop_server(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def test_a_redeployed_http_server_is_reconnected_to_with_backoff(events: Events) -> None:
    """The server dies while idle (its subscription stream drops): the session is lost, the
    restarted connection cannot reach it and tries again with backoff instead of spending the
    intensity; once the new server is up on the same port, calls go to it."""
    model = ScriptedModel({"go": [calls(call("pid", {}, id="before")), "one"],
                           "again": [calls(call("pid", {}, id="after")), "two"]})
    first_server, url = serve_http()
    servers = [first_server]
    try:
        with Agent(model, [http(url, reconnect_delay=0.05)]) as agent:
            first = agent.run("go")
            stop_server(first_server)
            events.wait_for("child_restarted", child_id="connection")
            assert events.wait_for("mcp_reconnect_failed")["attempt"] == 0
            second_server, _ = serve_http("--port", port_of(url))
            servers.append(second_server)
            events.wait_for("mcp_reconnected")
            after = agent.run("again")
    finally:
        for server in servers:
            stop_server(server)
    assert json.loads(results(first)["before"].content)["result"] == first_server.pid
    assert json.loads(results(after)["after"].content)["result"] == second_server.pid
    assert not [e for e in events.named() if e == ("restart_intensity_exceeded", "connection")]


def test_a_server_that_stays_away_is_given_up_after_its_reconnect_attempts(
        events: Events) -> None:
    server, url = serve_http()
    try:
        with Agent(ScriptedModel(["unused"]),
                   [http(url, reconnect_attempts=2, reconnect_delay=0.01)]) as agent:
            stop_server(server)
            events.wait_for("restart_intensity_exceeded", child_id="connection")
            events.wait_for("tool_source_orphaned")
            assert "pid" not in {spec.name for spec in agent.registry.specs()}
    finally:
        stop_server(server)


def test_a_server_redeployed_while_idle_is_renewed_without_a_restart(events: Events) -> None:
    """A 2025-11-25 server dies while the agent is idle and comes back on its port, with
    fresh session ids (and a tool more): the next call meets a 404 for its session, which
    is renewed in place (no restart, no intensity), the catalog listed again."""
    model = ScriptedModel({"go": [calls(call("pid", {}, id="before")), "one"],
                           "again": [calls(call("pid", {}, id="after")),
                                     calls(call("late", {"word": "up"}, id="new")), "two"]})
    first_server, url = serve_http("--legacy")
    servers = [first_server]
    try:
        with Agent(model, [http(url)]) as agent:
            first = agent.run("go")
            assert "late" not in {spec.name for spec in agent.registry.specs()}
            stop_server(first_server)
            second_server, _ = serve_http("--legacy", "--grown", "--port", port_of(url))
            servers.append(second_server)
            after = agent.run("again")
            assert "late" in {spec.name for spec in agent.registry.specs()}
    finally:
        for server in servers:
            stop_server(server)
    assert json.loads(results(first)["before"].content)["result"] == first_server.pid
    assert json.loads(results(after)["after"].content)["result"] == second_server.pid
    assert results(after)["new"].content == '{"result":"UP"}'
    assert events.wait_for("mcp_session_expired")["status"] == 404
    assert events.wait_for("mcp_session_renewed")["protocol"] == "2025-11-25"
    assert not events.named("child_restarted", "restart_intensity_exceeded")


@pytest.mark.parametrize("refuse", ["404", "400", "400-null", "400-id"])
def test_a_call_refused_for_its_session_runs_once_on_the_renewed_one(
        events: Events, refuse: str) -> None:
    """The server forgets the session (answering as the SDKs' transports do, 404, or as the
    reference servers do, 400 with a JSON-RPC error about the session that has no id, a null
    one, or the request's): the refused call never ran, so it is sent once more on the
    renewed session, and runs once."""
    model = ScriptedModel([calls(call("forget", {}, id="f")), calls(call("count", {}, id="c")),
                           calls(call("refused", {}, id="r")), "done"])
    server, url = serve_http("--legacy", "--refuse", refuse)
    try:
        with Agent(model, [http(url)]) as agent:
            outcome = agent.run("go")
    finally:
        stop_server(server)
    refused = json.loads(results(outcome)["r"].content)["result"]
    assert refused[0] == "tools/call" and refused.count("tools/call") == 1, refused
    assert results(outcome)["c"].content == '{"result":1}'
    assert events.wait_for("mcp_session_expired")["status"] == int(refuse[:3])
    events.wait_for("mcp_session_renewed")
    assert not events.named("child_restarted", "mcp_connection_lost")


def test_the_reference_server_redeployed_while_idle_is_renewed_in_place(
        events: Events) -> None:
    """``@modelcontextprotocol/server-everything`` (node, streamable HTTP) restarted on its
    port under an idle agent refuses the old session with HTTP 400 and a JSON-RPC error that
    has no ``id`` member: the session is renewed in place, and the calls after it succeed."""
    model = ScriptedModel({"go": [calls(call("echo", {"message": "one"}, id="before")), "1"],
                           "again": [calls(call("echo", {"message": "two"}, id="after")),
                                     calls(call("echo", {"message": "three"}, id="later")),
                                     "2"]})
    first, port = reference.start()
    servers = [first]
    try:
        with Agent(model, [McpToolProvider.http(
                "everything", f"http://127.0.0.1:{port}/mcp")]) as agent:
            before = agent.run("go")
            reference.stop(first)
            servers.append(reference.start(port)[0])
            after = agent.run("again")
    finally:
        for server in servers:
            reference.stop(server)
    assert results(before)["before"].content == "Echo: one"
    assert [results(after)[each].content for each in ("after", "later")] == \
        ["Echo: two", "Echo: three"]
    expired = events.wait_for("mcp_session_expired")
    assert (expired["status"], expired["error"]) == (
        400, "Bad Request: No valid session ID provided")
    assert events.wait_for("mcp_session_renewed")["protocol"] == "2025-11-25"
    assert not events.named("child_restarted", "mcp_connection_lost")


def test_a_server_that_forgets_every_session_is_given_up(events: Events) -> None:
    """Renewing does not go round for ever: a renewed session the server never accepted is
    a lost connection (restarts, then the supervisor gives up); the call the server refused
    is told it never ran."""
    policy = Recorder()
    model = ScriptedModel([calls(call("forget", {"forever": True}, id="f")),
                           calls(call("count", {}, id="c")), "done"])
    server, url = serve_http("--legacy")
    try:
        with Agent(model, [http(url, reconnect_attempts=1, reconnect_delay=0.01)],
                   on_tool_error=policy) as agent:
            agent.run("go")
            events.wait_for("tool_source_orphaned", source="mcp:web")
    finally:
        stop_server(server)
    refused = crash_of(policy.errors["c"])
    assert (refused.reason, refused.code) == ("handler_exit", "mcp_session_expired")
    assert "did not run" in refused.message
    assert "refused a renewed session it never accepted" in events.wait_for(
        "mcp_connection_lost")["why"]


@pytest.mark.parametrize("flags", [("--legacy",), ()], ids=["2025-11-25", "2026-07-28"])
def test_an_http_server_that_exits_mid_call_is_told_as_over_stdio(
        events: Events, flags: tuple[str, ...]) -> None:
    """The same event gets the same reason: ``handler_exit`` (the server may have run the
    call), ``mcp_transport_closed``, and a restart."""
    policy = Recorder()
    model = ScriptedModel([calls(call("die", {}, id="d")), "done"])
    server, url = serve_http(*flags)
    try:
        with Agent(model, [http(url, reconnect_delay=0.05)], on_tool_error=policy) as agent:
            agent.run("go")
            events.wait_for("child_restarted", child_id="connection")
    finally:
        stop_server(server)
    crash = crash_of(policy.errors["d"])
    assert (crash.reason, crash.code) == ("handler_exit", "mcp_transport_closed")


def test_an_unreachable_server_is_told_by_its_real_cause() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ChildStartError, match="ConnectError: All connection attempts failed"
                       ) as raised:
        Agent(ScriptedModel([]), [http(f"http://127.0.0.1:{port}/mcp", connect_timeout=10)])
    assert "ExceptionGroup" not in str(raised.value)


def test_an_unknown_tool_is_told_the_whole_catalog(http_url: str) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("missing", {}, id="m")), "done"])
    with Agent(model, [local, http(http_url)], on_tool_error=policy) as agent:
        agent.run("go")
    error = crash_of(policy.errors["m"])
    assert error.reason == "not_found"
    assert "known tools: add, boom, client, count, die" in error.message
    assert "local" in error.message


def test_tools_that_need_tasks_are_withheld_from_the_catalog(
        legacy_url: str, events: Events) -> None:
    with Agent(ScriptedModel([]), [http(legacy_url)]) as agent:
        offered = {spec.name for spec in agent.registry.specs()}
    assert "long_job" not in offered and {"add", "pid"} <= offered
    withheld = events.wait_for("mcp_tool_withheld", source="mcp:web")
    assert withheld["tool"] == "long_job" and "taskSupport" in withheld["why"]


def test_an_error_a_toolvisor_server_sends_is_encoded_once() -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("refuse", {}, id="r"), call("fail", {}, id="f")), "done"])
    served = McpToolProvider.stdio("served", [sys.executable, "-m", "toolvisor.cli", "mcp",
                                              "serve", "tests.programs.serve_tools:tools"],
                                   cwd=str(ROOT))
    with Agent(model, [served], on_tool_error=policy) as agent:
        outcome = agent.run("go")
    assert results(outcome)["r"].content == '{"error":"not today"}'
    assert policy.errors["r"] == "not today"
    crash = json.loads(results(outcome)["f"].content)["error"]
    assert crash["reason"] == "handler_raised" and "the disk is full" in crash["message"]


@pytest.mark.parametrize("server", ["http", "legacy"])
def test_the_client_introduces_itself_as_toolvisor(
        http_url: str, legacy_url: str, server: str) -> None:
    model = ScriptedModel([calls(call("client", {}, id="c")), "done"])
    with Agent(model, [http(http_url if server == "http" else legacy_url)]) as agent:
        outcome = agent.run("go")
    expected = f"toolvisor {importlib.metadata.version('toolvisor')}"
    assert json.loads(results(outcome)["c"].content) == {"result": expected}


def test_a_stdio_servers_stderr_goes_to_errlog(tmp_path: Path) -> None:
    """A path is appended to; an open file is written to (and stays the caller's)."""
    path = tmp_path / "server.log"
    with Agent(ScriptedModel([calls(call("pid", {}, id="p")), "done"]),
               [stdio(errlog=path)]) as agent:
        first = json.loads(results(agent.run("go"))["p"].content)["result"]
    with (tmp_path / "open.log").open("w") as log, \
            Agent(ScriptedModel([calls(call("pid", {}, id="q")), "done"]),
                  [stdio(errlog=log)]) as agent:
        second = json.loads(results(agent.run("again"))["q"].content)["result"]
    assert f"tests.programs.mcp_server {first} serving on stdio" in path.read_text()
    assert f"tests.programs.mcp_server {second} serving on stdio" in (
        tmp_path / "open.log").read_text()


def test_errlog_must_have_a_descriptor() -> None:
    with pytest.raises(TypeError, match="errlog must be a path or an open file"):
        stdio(errlog=io.StringIO())
