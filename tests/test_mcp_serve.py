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

ROOT = Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "toolvisor.cli", "mcp", "serve", "tests._serve_tools:tools"]


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


@pytest.fixture
def http_server() -> Iterator[str]:
    process = subprocess.Popen([*SERVE, "--http", "--port", "0"], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        assert line.startswith("serving MCP on "), f"the server said {line!r}"
        yield line.removeprefix("serving MCP on ").strip()
    finally:
        process.terminate()
        process.wait()
        process.stdout.close()


def test_served_over_http(http_server: str) -> None:
    async def main() -> None:
        async with Client(http_server, cache=None) as client:
            await exercise(client)

    anyio.run(main)
