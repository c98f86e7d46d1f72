"""toolvisor tools served over MCP, checked with the SDK's own client.

The server is ``python -m toolvisor.cli mcp serve``: over stdio (the client spawns it) and
over streamable HTTP on 127.0.0.1 (the test reads its URL from its first line of output).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import TextContent

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "toolvisor.cli", "mcp", "serve", "tests.programs.serve_tools:tools"]


def text_of(result: Any) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


async def exercise(client: Client) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == {"add", "fail", "refuse", "hang"}  # the manual tool is not served
    assert listed["add"].input_schema["required"] == ["a", "b"]

    added = await client.call_tool("add", {"a": 2, "b": 3})
    assert not added.is_error and added.structured_content == {"sum": 5}

    invalid = await client.call_tool("add", {"a": "two"})
    assert invalid.is_error and "$.a" in text_of(invalid)

    crashed = await client.call_tool("fail", {})
    assert crashed.is_error
    assert json.loads(text_of(crashed))["error"]["reason"] == "handler_raised"

    refused = await client.call_tool("refuse", {})
    assert refused.is_error and json.loads(text_of(refused)) == {"error": "not today"}

    started = time.monotonic()
    hung = await client.call_tool("hang", {})
    assert time.monotonic() - started < 10
    assert hung.is_error and json.loads(text_of(hung))["error"]["reason"] == "timeout"

    again = await client.call_tool("add", {"a": 1, "b": 1})  # the server is still there
    assert again.structured_content == {"sum": 2}


def test_served_over_stdio() -> None:
    params = StdioServerParameters(command=SERVE[0], args=SERVE[1:], cwd=str(ROOT))

    async def main() -> None:
        async with Client(params, cache=None) as client:
            await exercise(client)

    anyio.run(main)


def start_http(port: int | str = 0) -> tuple[subprocess.Popen[str], str]:
    """``mcp serve --http`` on ``port``; its URL once it listens (read from its output)."""
    process = subprocess.Popen([*SERVE, "--http", "--port", str(port)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("serving MCP on "):
        stop(process)
        pytest.fail(f"the server said {line!r} (exit code {process.returncode})")
    return process, line.removeprefix("serving MCP on ").strip()


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture
def http_server() -> Iterator[str]:
    process, url = start_http()
    try:
        yield url
    finally:
        stop(process)


def test_served_over_http(http_server: str) -> None:
    async def main() -> None:
        async with Client(http_server, cache=None) as client:
            await exercise(client)

    anyio.run(main)


def test_a_restarted_http_server_listens_on_its_port_again() -> None:
    """Stopped while a client was connected, the server closed that connection first (it
    waits in TIME_WAIT for a minute): the next server binds the port all the same."""
    first, url = start_http()

    async def connected_while_stopped() -> None:
        async with Client(url, cache=None, mode="legacy") as client:  # as the Inspector
            assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {
                "sum": 3}
            stop(first)

    anyio.run(connected_while_stopped)
    second, again = start_http(url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    try:
        assert again == url

        async def served() -> None:
            async with Client(again, cache=None) as client:
                added = await client.call_tool("add", {"a": 2, "b": 2})
                assert added.structured_content == {"sum": 4}

        anyio.run(served)
    finally:
        stop(second)
