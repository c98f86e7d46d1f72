"""Tool progress over MCP, both ways, with real servers.

Served (over stdio and streamable HTTP): a toolvisor tool's ``ctx.report_progress``, in a
thread or a worker process, reaches an MCP client that sent a progress token as
``notifications/progress``, before the result. As a client (over stdio): a server's progress
notifications for a call (the SDK's own ``MCPServer``, and a toolvisor ``ToolServer``) come
back as that call's progress, to ``on_progress``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from toolvisor import Agent, Completed, Tracing
from toolvisor.mcp import McpToolProvider
from toolvisor.testing import ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "toolvisor.cli", "mcp", "serve",
         "tests.programs.progress_serve_tools:tools"]
SDK_SERVER = [sys.executable, "-m", "tests.programs.mcp_server"]


@pytest.fixture(params=["stdio", "http"])
def served(request: pytest.FixtureRequest) -> Iterator[Any]:
    """How a client reaches the served tools: stdio (the client spawns the server), or
    streamable HTTP (``--http``; its URL read from its first line of output)."""
    if request.param == "stdio":
        yield StdioServerParameters(command=SERVE[0], args=SERVE[1:], cwd=str(ROOT))
        return
    process = subprocess.Popen([*SERVE, "--http", "--port", "0"], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        assert line.startswith("serving MCP on "), line
        yield line.removeprefix("serving MCP on ").strip()
    finally:
        process.terminate()
        process.wait()
        process.stdout.close()


def test_a_served_tools_progress_reaches_the_client_that_asked_for_it(served: Any) -> None:
    heard: dict[str, list[tuple[float, float | None, str | None]]] = {}

    def listener(name: str) -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None
                              ) -> None:
            heard.setdefault(name, []).append((progress, total, message))
        return on_progress

    async def main() -> None:
        async with Client(served, cache=None) as client:
            for name in ("build_report", "build_report_in_process"):
                result = await client.call_tool(name, {}, progress_callback=listener(name))
                assert not result.is_error, result
                assert heard[name] == [(1.0, None, "gathered the figures"),
                                       (0.75, 1.0, "drew the charts")]
            quiet = await client.call_tool("build_report", {})  # no token: nothing is sent
            assert not quiet.is_error

    anyio.run(main)
    assert set(heard) == {"build_report", "build_report_in_process"}


def run_with_progress(provider: McpToolProvider, tool: str, arguments: dict[str, Any]
                      ) -> list[dict[str, Any]]:
    """One call of the server's ``tool`` in a run: the ``tool_progress`` data it reported."""
    told: list[dict[str, Any]] = []
    model = ScriptedModel([calls(call(tool, arguments, id="m1")), "done"])
    with Agent(model, [provider], tracing=Tracing(
            on_progress=lambda run_id, event, data: told.append(data)
            if event == "tool_progress" else None)) as agent:
        outcome = agent.run("go", wait_for=60)
    assert isinstance(outcome, Completed), outcome
    assert all((d["tool_call_id"], d["tool_name"]) == ("m1", tool) for d in told)
    return told


def test_a_servers_progress_comes_back_as_the_calls_progress() -> None:
    provider = McpToolProvider.stdio("local", SDK_SERVER, cwd=str(ROOT))
    told = run_with_progress(provider, "reports", {"steps": 2})
    assert [(d["message"], d["fraction"]) for d in told] == [("step 1 of 2", 0.5),
                                                             ("step 2 of 2", 1.0)]


def test_progress_crosses_two_mcp_hops_between_toolvisors() -> None:
    """An agent calls a toolvisor tool served over MCP: the tool's reports, made in a worker
    process of the server, reach the calling agent's ``on_progress``."""
    provider = McpToolProvider.stdio("served", SERVE, cwd=str(ROOT))
    told = run_with_progress(provider, "build_report_in_process", {})
    assert [(d["message"], d["fraction"]) for d in told] == [("gathered the figures", None),
                                                             ("drew the charts", 0.75)]
