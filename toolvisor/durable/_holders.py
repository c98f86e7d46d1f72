"""Who holds a run's lease: the name a process holds leases under, and whether it still runs.

A holder is ``hostname:pid:token`` (the machine's hostname). Whether it still runs can be told
only on its own machine: its pid is gone, or a zombie (killed, its parent has not reaped it yet:
its pid is still taken). A host takes a dead holder's lease over at once; ``python -m
toolvisor.cli runs`` says so.
"""

from __future__ import annotations

import os
import socket
import uuid


def new_holder() -> str:
    """A fresh holder name for this process: ``hostname:pid:token``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_gone(holder: str) -> bool:
    """Whether ``holder`` names a process of this machine that no longer runs; ``False`` for
    a live one, one of another machine, or a name not of this form."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive or a zombie, another user's
        pass
    return _zombie(int(pid))


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a zombie, as ``/proc`` says (Linux); ``False`` where it cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rpartition(")")[2].split()  # "pid (comm) STATE ..."
    except OSError:
        return False
    return bool(fields) and fields[0] in ("Z", "X")
