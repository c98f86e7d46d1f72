"""Whether this machine can run sandboxes: ``bwrap`` on the path and user namespaces it may
create. Checked when an agent with ``sandbox`` tools starts; the error names the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

_PROBE = ("--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
          "--dev", "/dev", "true")
_PROBE_WAIT = 10.0

_lock = threading.Lock()  # guards _found
_found: dict[str, str] = {}  # by PATH: the bwrap that passed the probe (a failure is retried)


def bwrap_path() -> str:
    """The path of a ``bwrap`` that can make a sandbox here; ``RuntimeError`` naming the fix."""
    search = os.environ.get("PATH", os.defpath)
    with _lock:
        if search in _found:
            return _found[search]
        path = shutil.which("bwrap", path=search)
        if path is None:
            raise RuntimeError(
                "isolation='sandbox' needs bubblewrap's `bwrap` on the PATH, and there is none: "
                "install the `bubblewrap` package (Debian/Ubuntu: `apt-get install bubblewrap`, "
                "Fedora: `dnf install bubblewrap`)")
        try:
            probe = subprocess.run([path, *_PROBE], capture_output=True, text=True,
                                   timeout=_PROBE_WAIT, env={}, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"isolation='sandbox': {path} could not be run: {exc}") from exc
        if probe.returncode != 0:
            raise RuntimeError(
                f"isolation='sandbox': {path} cannot create the sandbox's namespaces here "
                f"({probe.stderr.strip() or f'exit code {probe.returncode}'}). The kernel must "
                "allow unprivileged user namespaces: set `sysctl kernel.unprivileged_userns_clone"
                "=1` (Debian) or `user.max_user_namespaces` above 0; on Ubuntu 24.04 also "
                "`kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for "
                "bwrap; in a container, run it with user namespaces allowed (Docker: "
                "`--security-opt seccomp=unconfined` or a profile that allows clone/unshare)")
        _found[search] = path
        return path
