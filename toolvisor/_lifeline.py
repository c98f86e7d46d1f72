"""Nothing a host starts outlives it: each child process dies with its parent, however the
parent dies (``kill -9`` included).

On Linux the kernel does it: a child asks, with ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, to be
sent ``SIGKILL`` when its parent dies, so it ends even when it is stuck in a CPU-bound handler
or in C code holding the GIL, which a watchdog thread inside it could not interrupt. Two
catches, both handled by the callers: the signal fires when the *thread* that started the child
ends, not the process, so children are started from threads that live as long as they need
them (the process pool's manager thread, an MCP session's event loop thread, the forkserver's
own thread, ``toolvisor-forkserver``); and each level of a tree watches its own parent (the
forkserver its host, a process worker its forkserver), since the setting is not inherited
across ``fork``. It is kept across ``exec``, which :func:`die_with_parent_argv` relies on for a
program toolvisor does not write (an MCP stdio server). A child checks its parent after asking
(:func:`die_with_parent`): a parent that died before the request was made is noticed at once.

Elsewhere (macOS) nothing is arranged; the children end as their own protocols say (a worker at
EOF on its pipe, an MCP stdio server at EOF on its stdin).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["die_with_parent", "die_with_parent_argv"]

_PR_SET_PDEATHSIG = 1

# The launcher of a program toolvisor does not write: ask, check the parent, then become the
# program. Run with ``-I -S``: no site, no user paths, nothing of toolvisor to import.
_LAUNCHER = (
    "import ctypes,os,signal,sys\n"
    "if ctypes.CDLL(None,use_errno=True).prctl(1,signal.SIGKILL,0,0,0)!=0:"
    "sys.exit('toolvisor: prctl(PR_SET_PDEATHSIG) failed: '+os.strerror(ctypes.get_errno()))\n"
    "if os.getppid()!=int(sys.argv[1]):os._exit(1)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when the thread of ``parent`` (a pid) that started
    it ends; if ``parent`` is already gone (this process was re-parented), end now.

    ``parent``: the pid this process was started by; its death is what is watched for.
    """
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent_argv(argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` so that it dies with this process (the thread that
    starts it): a short Python launcher that asks for that, then ``exec``\\ s ``argv`` in its own
    place (the same pid). ``argv`` itself on other systems than Linux.

    ``argv``: the program and its arguments, as ``subprocess`` takes them.
    """
    if sys.platform != "linux":
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), *argv]
