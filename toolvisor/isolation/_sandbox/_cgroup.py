"""A sandbox's own ``pids`` cgroup, where the machine lets this process make one.

The process limit cannot be an rlimit for a sandbox started by root: the kernel never applies
``RLIMIT_NPROC`` to uid 0, and a user namespace maps the sandbox to the uid that started it.
So, where a ``pids`` controller is writable (cgroup v2's unified tree with ``pids`` enabled,
or v1's ``pids`` hierarchy), each sandbox gets a cgroup whose ``pids.max`` is the limit; its
``pids.events`` says whether a fork was refused, and every process left in it is killed
before it is removed. Elsewhere the rlimit stands (it holds for any uid but root). A host
killed with ``kill -9`` cannot remove its cgroups (its sandboxes die with it: bwrap's
``--die-with-parent``); the next sandbox made on the machine removes them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import signal
import time

_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
_EMPTY_WAIT = 2.0  # seconds for killed processes to leave the cgroup before it is removed

_names = itertools.count()
_HOST = re.compile(r"toolvisor-(\d+)-\d+")  # a sandbox's cgroup: its host's pid, a number


@functools.cache
def pids_root() -> str | None:
    """A directory where this process may make ``pids`` cgroups, or ``None`` (looked for once)."""
    return next((r for r in _ROOTS if _writable_pids(r)), None)


def _writable_pids(root: str) -> bool:
    if root == "/sys/fs/cgroup":  # v2: the root itself must delegate pids
        try:
            with open(os.path.join(root, "cgroup.subtree_control")) as file:
                if "pids" not in file.read().split():
                    return False
        except OSError:
            return False
    return os.path.isfile(os.path.join(root, "cgroup.procs")) and os.access(root, os.W_OK)


def sweep_dead_hosts(root: str) -> None:
    """Remove the empty cgroups under ``root`` that a host which is gone left behind: one
    killed (``kill -9``) never removed its sandboxes' cgroups, though its sandboxes died with
    it. ``rmdir`` fails on a cgroup that still holds a process, so nothing running is touched
    (a pid of another pid namespace included). Called before each new cgroup is made."""
    for name in os.listdir(root):
        host = _HOST.fullmatch(name)
        if host is None or _alive(int(host[1])):
            continue
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(root, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


class PidsCgroup:
    """One sandbox's cgroup; ``join_command`` puts the sandbox in it before it starts."""

    def __init__(self, root: str, limit: int) -> None:
        sweep_dead_hosts(root)
        self.path = os.path.join(root, f"toolvisor-{os.getpid()}-{next(_names)}")
        os.mkdir(self.path)
        with open(os.path.join(self.path, "pids.max"), "w") as file:
            file.write(str(limit))

    def join_command(self, argv: list[str]) -> list[str]:
        """``argv`` run from a shell that first moves itself into this cgroup (so the sandbox
        and all its processes are born in it)."""
        procs = os.path.join(self.path, "cgroup.procs")
        return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv]

    def refused_forks(self) -> int:
        """How many forks the limit refused so far."""
        try:
            with open(os.path.join(self.path, "pids.events")) as file:
                for line in file:
                    key, _, value = line.partition(" ")
                    if key == "max":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill whatever is left in the cgroup and remove it; ``OSError`` if it is still not
        empty after ``_EMPTY_WAIT`` seconds."""
        deadline = time.monotonic() + _EMPTY_WAIT
        while True:
            pids = self._pids()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)  # the killed processes are leaving it

    def _pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as file:
                return [int(line) for line in file if line.strip()]
        except OSError:
            return []
