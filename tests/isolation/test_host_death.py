"""Nothing a host starts outlives it, however the host dies: a real host
(``tests.programs.orphan_host``) is SIGKILLed while a call hangs in a child process of it, and every
process it had started (recorded before the kill, by pid and start time) must be gone within a few
seconds.

The kinds of child, all started by one host: a ``process`` worker stuck in a CPU-bound handler
with the forkserver and the resource tracker (``forkserver``), the same under ``spawn``, a
bubblewrap sandbox, and an MCP stdio server stuck in a call (it cannot read EOF on its stdin).
"""

from __future__ import annotations

import json
import os
import signal
import time

from tests.support.hosts import kill, started_hosts
from toolvisor.isolation._sandbox._cgroup import pids_root, sweep_dead_hosts

DEADLINE = 5.0  # seconds the children get to die after the host

# What each kind's host must have started (words of the children's command lines), so that
# the test checks the children it means to.
EXPECTED = {
    "forkserver": ["multiprocessing.forkserver", "multiprocessing.resource_tracker"],
    "spawn": ["multiprocessing.spawn", "multiprocessing.resource_tracker"],
    "sandbox": ["bwrap", "_sandbox._child"],
    "mcp": ["tests.programs.mcp_server"],
}


def _stat(pid: int) -> tuple[int, int, str] | None:
    """``(parent pid, start time, state)`` of a live process, or ``None``."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[19]), fields[0]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def descendants(root: int) -> dict[int, int]:
    """Every process descending from ``root`` now: its pid and start time."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append(int(entry))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if (stat := _stat(child)) is not None:
                found[child] = stat[1]
                todo.append(child)
    return found


def alive(processes: dict[int, int]) -> dict[int, str]:
    """Those of ``processes`` (pid to start time) still running, with their command lines (a
    zombie has ended; a pid taken by a new process is not the one recorded)."""
    left = {}
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started and stat[2] != "Z":
            left[pid] = _cmdline(pid)
    return left


def test_nothing_a_host_started_outlives_its_sigkill() -> None:
    """One host with a call hung in each kind of child, so the interpreters start at once."""
    with started_hosts("tests.programs.orphan_host") as start:
        host = start(*EXPECTED)
        assert host.stdout is not None
        hung: set[str] = set()
        while hung != set(EXPECTED):  # an MCP server's log lines come too
            line = host.stdout.readline()
            assert line, f"the host exited early with {host.wait()}"
            if line.startswith("{"):
                hung.add(json.loads(line)["hung"])
        children = descendants(host.pid)
        commands = " ".join(_cmdline(pid) for pid in children)
        for kind, words in EXPECTED.items():
            assert all(word in commands for word in words), (kind, commands)
        root = pids_root()
        cgroups = [] if root is None else [
            name for name in os.listdir(root) if name.startswith(f"toolvisor-{host.pid}-")]
        assert root is None or cgroups  # the sandbox's, which its host cannot remove
        kill(host)
        deadline = time.monotonic() + DEADLINE
        while (left := alive(children)) and time.monotonic() < deadline:
            time.sleep(0.02)  # the kernel and the children's own exits, in other processes
        for pid in left:  # nothing is leaked by a failure either
            os.kill(pid, signal.SIGKILL)
        assert left == {}, f"still running {DEADLINE} s after the host's SIGKILL"
    if root is not None:  # the next sandbox made on the machine removes them
        sweep_dead_hosts(root)
        assert set(cgroups) & set(os.listdir(root)) == set()
