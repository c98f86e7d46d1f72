"""The tests' own MCP server (``tests/programs/mcp_server.py``): its command, and a stdio
provider that starts it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from toolvisor.mcp import McpToolProvider

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.programs.mcp_server"]


def stdio(*flags: str, **settings: Any) -> McpToolProvider:
    return McpToolProvider.stdio("local", [*SERVER, *flags], cwd=str(ROOT), **settings)
