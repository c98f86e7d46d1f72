"""A program using toolvisor ends by itself: no toolvisor thread keeps the interpreter alive,
whether the log's reader went away or the program forgot ``close()``.

Each test runs a real program (``tests.programs.chatty_host``, ``tests.programs.forgetful_host``)
with real pipes. ``communicate``'s timeout only bounds a hang, so a failure cannot stall the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HANG_BOUND = 120.0  # seconds: far past any normal run, only there to turn a hang into a failure


def finish(process: subprocess.Popen[str], stdin: str | None = None) -> str:
    """The program's stdout once it has exited by itself (killed past the bound: a failure)."""
    try:
        out, _ = process.communicate(stdin, timeout=HANG_BOUND)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return out


def test_a_log_reader_that_goes_away_costs_events_never_the_program() -> None:
    """``python app.py 2>&1 | head -3`` with console logging: once ``head`` has its lines and
    closes the pipe, every later event is dropped, the runs complete, the program exits."""
    with subprocess.Popen([sys.executable, "-m", "tests.programs.chatty_host"], cwd=ROOT, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        assert process.stderr is not None
        head = [process.stderr.readline() for _ in range(3)]
        process.stderr.close()
        out = finish(process, "the reader is gone\n")
    assert all("[info" in line for line in head), head
    assert process.returncode == 0
    report = json.loads(out)
    assert report["outcomes"] == ["Completed"] * 4
    assert report["dropped"] > 0


def test_a_program_that_forgets_close_exits_and_no_toolvisor_thread_holds_it(
        tmp_path: Path) -> None:
    """Every thread the agent started is still running at the end of the program (a run
    sleeps before a retry, another waits on a key, process workers, an MCP session): all
    are daemons, and the process pool is closed at exit before multiprocessing joins its
    workers, so the interpreter exits."""
    with subprocess.Popen([sys.executable, "-m", "tests.programs.forgetful_host",
                           str(tmp_path / "runs.sqlite")], cwd=ROOT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process:
        out = finish(process)
    assert process.returncode == 0
    report = json.loads(out)
    assert report["outcomes"] == ["Completed", "Suspended"]
    assert report["non_daemon"] == []
    threads = " ".join(report["threads"])
    for kind in ("Supervisor-", "DynamicSupervisor-", "OrchestratorActor-", "McpConnection-",
                 "mcp-mcp:local", "toolvisor-waits", "toolvisor-key-", "toolvisor-leases",
                 "toolvisor-process-pool", "toolvisor-worker-", "toolvisor-asyncio",
                 "toolvisor-deadlines", "toolvisor-actor-", "toolvisor-forkserver"):
        assert kind in threads, (kind, report["threads"])
