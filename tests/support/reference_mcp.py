"""The reference MCP server, ``@modelcontextprotocol/server-everything``, over streamable HTTP.

``make test`` installs it, pinned (``MCP_REFERENCE_VERSION``), in ``tests/.npm``; node runs
it with ``tests/programs/loopback.cjs`` preloaded, so it listens on 127.0.0.1 and tells its
port. A test that cannot run it fails, naming what to install: it is never skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

VERSION = "2026.8.31"  # the Makefile's MCP_REFERENCE_VERSION
TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS / ".npm" / "node_modules" / "@modelcontextprotocol" / "server-everything"
LOOPBACK = TESTS / "programs" / "loopback.cjs"
INSTALL = (f"run make test, which installs it (npm install --prefix tests/.npm "
           f"@modelcontextprotocol/server-everything@{VERSION})")


def start(port: int = 0) -> tuple[subprocess.Popen[str], int]:
    """Start the server on ``port`` (0: a free one); the process and the port it listens
    on, once it listens."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("the MCP reference server needs node: install the 'nodejs' and 'npm' "
                    f"packages (apt-get install nodejs npm), then {INSTALL}")
    try:
        installed = json.loads((PACKAGE / "package.json").read_text())["version"]
    except FileNotFoundError:
        pytest.fail(f"the MCP reference server is not installed in tests/.npm: {INSTALL}")
    if installed != VERSION:
        pytest.fail(f"tests/.npm holds the MCP reference server {installed}, not {VERSION}: "
                    f"{INSTALL}")
    process = subprocess.Popen(
        [node, "--require", str(LOOPBACK), str(PACKAGE / "dist" / "index.js"),
         "streamableHttp"], env={"PATH": os.environ.get("PATH", ""), "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    said = []
    for line in process.stderr:  # its own lines may come first
        if line.startswith('{"port":'):
            return process, int(json.loads(line)["port"])
        said.append(line)
    stop(process)
    pytest.fail(f"the MCP reference server exited with {process.returncode} before it "
                f"listened: {''.join(said)}")


def stop(process: subprocess.Popen[str]) -> None:
    """Kill the server (a redeploy, or the test's end) and reap it."""
    process.kill()
    process.wait()
    if process.stderr is not None:
        process.stderr.close()
