"""The bwrap command line of one sandbox: its namespaces, its narrow read-only filesystem, its
scratch directory and its environment."""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass
from types import ModuleType

from toolvisor.isolation._sandbox._options import SandboxOptions
from toolvisor.isolation._sandbox._proxy import PORT, SOCKET_DIR, SOCKET_NAME

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache")
"""The system's programs and shared libraries (a symlink, as on a merged-/usr system, stays
one). Nothing else of /etc: it holds the machine's secrets."""
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl",
                  "/etc/ca-certificates", "/etc/gai.conf")
"""What name resolution and TLS read, bound only for a tool that has the network."""
SCRATCH = "/scratch"
"""The sandbox's working directory: a fresh tmpfs, gone with the sandbox."""
CHILD = "toolvisor.isolation._sandbox._child"


@dataclass(frozen=True, slots=True)
class Profile:
    """What makes two sandboxes interchangeable: the options and the code they import
    (``imports``: the directories or files of the top-level packages, ``roots``: where
    they are imported from)."""

    options: SandboxOptions
    imports: tuple[str, ...]
    roots: tuple[str, ...]


def _top_level(name: str, module: ModuleType) -> tuple[list[str], str]:
    """The paths the top-level package of ``module`` (imported as ``name``) occupies, and the
    directory it is imported from."""
    top = sys.modules.get(name.partition(".")[0], module)
    paths = list(getattr(top, "__path__", ()))
    if not paths:
        paths = [os.path.abspath(str(top.__file__))]
    return [os.path.abspath(p) for p in paths], os.path.dirname(os.path.abspath(paths[0]))


def importable(module_name: str) -> str | None:
    """The name a sandbox imports ``module_name`` by: itself, or for the program's
    ``__main__`` the module it was run as (``python -m pkg.mod``); ``None`` for a program run
    from a file path, stdin or ``-c``, which a sandbox cannot import."""
    if module_name != "__main__":
        return module_name
    name = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
    return name if isinstance(name, str) and name != "__main__" else None


def main_module() -> str:
    """What the sandbox imports as its ``__main__`` (the program's module, or ``-``)."""
    return importable("__main__") or "-"


def profile(options: SandboxOptions, module_name: str) -> Profile:
    """The profile of a tool whose handler lives in ``module_name`` (imported if it is not:
    ``ImportError`` if it cannot be)."""
    imports: list[str] = []
    roots: list[str] = []
    for name, module in ((importable(module_name) or module_name,
                          importlib.import_module(module_name)),
                         ("toolvisor", sys.modules["toolvisor"])):
        paths, root = _top_level(name, module)
        imports += [p for p in paths if p not in imports]
        if root not in roots:
            roots.append(root)
    return Profile(options, tuple(imports), tuple(roots))


def _python_paths() -> list[str]:
    """The interpreter and the libraries it imports from (the standard library, the
    environment's site-packages)."""
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.dirname(os.path.realpath(sys.executable))}
    paths.add(sys.prefix)
    for entry in sys.path:
        if entry and os.path.basename(entry) in ("site-packages", "dist-packages"):
            paths.add(entry)
    return sorted(p for p in paths if os.path.exists(p))


def _bind(argv: list[str], path: str) -> None:
    if os.path.islink(path) and os.path.dirname(path) == "/":
        argv += ["--symlink", os.readlink(path), path]
    elif os.path.exists(path):
        argv += ["--ro-bind", path, path]


def command(bwrap: str, profile: Profile, conn_fd: int, link_fd: int,
            proxy_dir: str | None) -> list[str]:
    """The command that runs one sandboxed worker on the two file descriptors given
    (``proxy_dir``: where its allow-list proxy's socket is, if it has one)."""
    options = profile.options
    # bwrap started by root keeps every capability inside the sandbox unless told to drop them
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--hostname", "sandbox", "--proc", "/proc",
            "--dev", "/dev"]
    if options.network is True:
        argv.append("--share-net")
    for path in _SYSTEM:
        _bind(argv, path)
    for path in (*_python_paths(), *profile.imports, *options.read_only):
        _bind(argv, path)
    if options.network is True:
        for path in _NETWORK_FILES:
            _bind(argv, path)
    if proxy_dir is not None:
        argv += ["--ro-bind", proxy_dir, SOCKET_DIR]
    argv += ["--size", str(options.scratch), "--tmpfs", SCRATCH, "--chdir", SCRATCH]
    limits = {"memory": options.memory, "cpu_seconds": options.cpu_seconds,
              "file_size": options.file_size, "open_files": options.open_files,
              "processes": options.processes,
              "proxy": None if proxy_dir is None else f"{SOCKET_DIR}/{SOCKET_NAME}"}
    argv += ["--", sys.executable, "-s", "-B", "-m", CHILD, str(conn_fd), str(link_fd),
             json.dumps(limits), main_module()]
    return argv


def environment(profile: Profile) -> dict[str, str]:
    """The sandbox's whole environment: the allowed variables, what Python needs, and the
    proxy's address for a network allow-list (in both spellings clients read)."""
    env = profile.options.environment()
    env.update(PYTHONPATH=os.pathsep.join(profile.roots), HOME=SCRATCH, TMPDIR=SCRATCH,
               PATH="/usr/local/bin:/usr/bin:/bin")
    if isinstance(profile.options.network, tuple):
        proxy = f"http://127.0.0.1:{PORT}"
        for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            env[name] = proxy
    return env
