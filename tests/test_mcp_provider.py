"""MCP servers as supervised tool sources, against real servers the tests start themselves.

One streamable HTTP server (``tests._mcp_server --http``) serves the whole module; each test
connects its own agent to it. The crash tests spawn stdio servers of their own, since they
kill them. Nothing sleeps: a test waits for an event, or reads a child's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_supervisor import Events

from toolvisor import Agent, Completed, ToolError, function_tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.machine import Continue, Decision, FailedCall
from toolvisor.mcp import McpToolProvider
from toolvisor.supervisors import ChildStartError
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "tests._mcp_server"]
TOKEN = "s3cret"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The module's HTTP server; it tells its URL on its first line of output."""
    process = subprocess.Popen([*SERVER, "--http", "--token", TOKEN], cwd=ROOT,
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


def http(url: str, **settings: Any) -> McpToolProvider:
    return McpToolProvider.http("web", url, headers={"Authorization": f"Bearer {TOKEN}"},
                                **settings)


def stdio(*flags: str, **settings: Any) -> McpToolProvider:
    return McpToolProvider.stdio("local", [*SERVER, *flags], cwd=str(ROOT), **settings)


class Recorder:
    """An ``on_tool_error`` policy that keeps what it saw and lets the run continue."""

    def __init__(self) -> None:
        self.errors: dict[str, Any] = {}

    def __call__(self, failed: FailedCall, error: Any) -> Decision:
        self.errors[failed.call.id] = error
        return Continue()


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
    with Agent(ScriptedModel([]), [local], mcp=[http(http_url)]) as agent:
        specs = {s.name: s for s in agent.registry.specs()}
        assert {"add", "echo", "boom", "local"} <= set(specs)
        assert specs["add"].input_schema["required"] == ["a", "b"]
        state = agent.registry.state()
        assert "add" in state.sources["mcp:web"].members
        assert [c.id for c in agent.supervisor.which_children()] == [
            "tool_calls", "mcp:web", "orchestrator"]


def test_calls_reports_and_crashes_are_told_apart(http_url: str) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("add", {"a": 2, "b": 3}, id="ok"),
                                 call("boom", {"why": "disk full"}, id="reported"),
                                 call("rpc_error", {}, id="rpc"),
                                 call("missing", {}, id="unknown")), "done"])
    with Agent(model, mcp=[http(http_url)], on_tool_error=policy) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Completed)
    assert results(outcome)["ok"].content == '{"result":5}'
    assert policy.errors["reported"] == "Error executing tool boom"  # isError: Err, untouched
    rpc = crash_of(policy.errors["rpc"])
    assert (rpc.reason, rpc.code) == ("handler_raised", "mcp_protocol_error")
    assert "-32099" in rpc.message
    assert crash_of(policy.errors["unknown"]).reason == "not_found"


def test_a_tool_added_at_run_time_reaches_the_next_model_request(http_url: str) -> None:
    offered: list[set[str]] = []

    def respond(request: ModelRequest) -> ModelResponse:
        offered.append({t.name for t in request.tools})
        if len(offered) == 1:
            return calls(call("grow", {}, id="g"))
        if len(offered) == 2:
            return calls(call("late", {"word": "hi"}, id="l"))
        return ModelResponse(text="done")

    with Agent(FunctionModel(respond), mcp=[http(http_url)]) as agent:
        generation = agent.registry.generation
        outcome = agent.run("go")
        assert agent.registry.generation > generation
    assert "late" in offered[1]
    assert results(outcome)["l"].content == '{"result":"HI"}'


def test_the_timeout_cancels_the_call_on_the_server(http_url: str) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("hang", {}, id="h")),
                           calls(call("was_cancelled", {}, id="w")), "done"])
    with Agent(model, mcp=[http(http_url, timeout=0.5)], on_tool_error=policy) as agent:
        outcome = agent.run("go")
    assert crash_of(policy.errors["h"]).reason == "timeout"
    assert results(outcome)["w"].content == '{"result":true}'


def test_a_request_without_the_token_cannot_connect(http_url: str) -> None:
    with pytest.raises(ChildStartError, match="mcp:web"):
        Agent(ScriptedModel([]), mcp=[McpToolProvider.http("web", http_url,
                                                           connect_timeout=10)])


def test_a_server_that_exits_mid_call_is_restarted(events: Events) -> None:
    policy = Recorder()
    model = ScriptedModel([calls(call("pid", {}, id="before")), calls(call("die", {}, id="d")),
                           "waiting", calls(call("pid", {}, id="after")), "done"])
    with Agent(model, mcp=[stdio()], on_tool_error=policy) as agent:
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
    with Agent(model, [local], mcp=[doomed], on_tool_error=policy) as agent:
        events.wait_for("restart_intensity_exceeded", supervisor_id="mcp:local")
        events.wait_for("tool_source_orphaned", source="mcp:local")
        state = agent.registry.state()
        assert "mcp:local" not in state.sources
        assert state.orphans["mcp:local"].members == ("echo",)
        assert {s.name for s in agent.registry.specs()} == {"local"}
        outcome = agent.run("go")
        assert [c.id for c in agent.supervisor.which_children()] == ["tool_calls",
                                                                      "orchestrator"]
    assert crash_of(policy.errors["gone"]).reason == "not_found"
    assert results(outcome)["mine"].content == "local ok"


def test_the_sdk_is_an_extra_named_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "toolvisor.mcp._session", raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ImportError, match=r"toolvisor\[mcp\]"):
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


def stop_server(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def test_a_redeployed_http_server_is_reconnected_to_with_backoff(events: Events) -> None:
    """The server dies while idle (its subscription stream drops): the session is lost, the
    restarted connection cannot reach it and tries again with backoff instead of spending the
    intensity; once the new server is up on the same port, calls go to it."""
    model = ScriptedModel([calls(call("pid", {}, id="before")), "one",
                           calls(call("pid", {}, id="after")), "two"])
    first_server, url = serve_http()
    servers = [first_server]
    try:
        with Agent(model, mcp=[http(url, reconnect_delay=0.05)]) as agent:
            first = agent.run("go")
            stop_server(first_server)
            events.wait_for("child_restarted", child_id="connection")
            assert events.wait_for("mcp_reconnect_failed")["attempt"] == 0
            port = url.rsplit(":", 1)[1].split("/")[0]
            second_server, _ = serve_http("--port", port)
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
                   mcp=[http(url, reconnect_attempts=2, reconnect_delay=0.01)]) as agent:
            stop_server(server)
            events.wait_for("restart_intensity_exceeded", child_id="connection")
            events.wait_for("tool_source_orphaned")
            assert "pid" not in {spec.name for spec in agent.registry.specs()}
    finally:
        stop_server(server)
