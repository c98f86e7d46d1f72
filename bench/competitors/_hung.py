"""Runs one hung-tool case in a child process and says what the framework did with it.

The child reports when the turn started, when the framework returned, whether the tool's thread
was still running then, and when its event loop closed; the parent watches for the child to exit
and kills it ``DEADLINE_SECONDS`` after the turn started, so a hung framework never hangs the
benchmark. State: the reader thread owns the child's stdout and hands each line to the main
thread through a queue; everything else belongs to the main thread.
"""

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

DEADLINE_SECONDS = 2.0
STARTUP_SECONDS = 60.0
"""How long the child may take to import its framework and build the agent."""
ROOT = Path(__file__).resolve().parents[2]


def run_hung_case(
    framework: str, driver: str, variant: str, setting: str, deadline: float = DEADLINE_SECONDS
) -> dict[str, Any]:
    """Run ``driver``'s ``variant`` in a child process; a row for the results table."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "bench.competitors._hung_child", framework, driver, variant]
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        assert child.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True)
        reader.start()
        events, started_at, exited_at = _collect(lines, deadline)
        killed = child.poll() is None and exited_at is None
        if killed:
            child.kill()
        child.wait()
        reader.join()
        child.stdout.close()
        stderr.seek(0)
        stderr_tail = stderr.read()[-600:]
    return _row(
        framework,
        driver,
        variant,
        setting,
        deadline,
        events,
        started_at,
        exited_at,
        killed,
        child.returncode,
        stderr_tail,
    )


def _read_lines(stream: IO[str], lines: "queue.Queue[str | None]") -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _collect(
    lines: "queue.Queue[str | None]", deadline: float
) -> tuple[dict[str, dict[str, Any]], float | None, float | None]:
    """Events by name, when "started" arrived and when stdout closed (parent clock)."""
    events: dict[str, dict[str, Any]] = {}
    started_at: float | None = None
    give_up_at = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            line = lines.get(timeout=max(0.0, give_up_at - time.monotonic()))
        except queue.Empty:
            return events, started_at, None
        if line is None:
            return events, started_at, time.monotonic()
        event = json.loads(line)
        events[event["event"]] = event
        if event["event"] == "started":
            started_at = time.monotonic()
            give_up_at = started_at + deadline


def _row(
    framework: str,
    driver: str,
    variant: str,
    setting: str,
    deadline: float,
    events: dict[str, dict[str, Any]],
    started_at: float | None,
    exited_at: float | None,
    killed: bool,
    returncode: int,
    stderr_tail: str,
) -> dict[str, Any]:
    returned = events.get("returned")
    loop_closed = events.get("event_loop_closed")
    finished = events.get("interpreter_exiting")
    exited_after = (
        exited_at - started_at if exited_at is not None and started_at is not None else None
    )
    refused = events.get("refused")
    refusal = None if refused is None else str(refused["error"])
    row: dict[str, Any] = {
        "kind": "hung",
        "framework": framework,
        "driver": driver,
        "variant": variant,
        "setting": setting,
        "deadline_s": deadline,
        "returned_after_s": None if returned is None else returned["t"],
        "outcome": None if returned is None else returned["outcome"],
        "tool_running_at_return": None if returned is None else returned["tool_running"],
        "event_loop_closed_after_s": None if loop_closed is None else loop_closed["t"],
        "run_finished_after_s": None if finished is None else finished["t"],
        "process_exited_after_s": exited_after,
        "killed_at_deadline": killed,
        "refused": refusal,
        "tool_worker_killed": bool(events.get("tool_worker_killed", {}).get("killed")),
    }
    row["verdict"] = _verdict(row, started=started_at is not None, refusal=refusal)
    if (started_at is None and refusal is None) or (returncode != 0 and not killed):
        row["stderr_tail"] = stderr_tail
    return row


def _verdict(row: dict[str, Any], *, started: bool, refusal: str | None) -> str:
    if refusal is not None:
        return f"setting refused before the turn: {refusal}"
    if not started:
        return "the child never started the turn (see stderr_tail)"
    deadline = row["deadline_s"]
    if row["returned_after_s"] is None:
        return f"did not return within {deadline:g} s; child killed"
    parts = [f"returned after {row['returned_after_s']:.2f} s"]
    if row["tool_running_at_return"]:
        parts.append("tool thread still running")
    if row["tool_worker_killed"]:
        parts.append("the tool's worker process killed")
    if row["killed_at_deadline"]:
        blocked = (
            "interpreter exit (joining the tool thread)"
            if row["run_finished_after_s"] is not None
            else "asyncio.run (shutting down its executor)"
        )
        parts.append(f"{blocked} blocked until killed at {deadline:g} s")
    else:
        parts.append(f"process exited after {row['process_exited_after_s']:.2f} s")
    return "; ".join(parts)
