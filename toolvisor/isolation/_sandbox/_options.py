"""What a ``sandbox`` tool's ``options`` may say, checked when the tool is built.

``Tool(isolation="sandbox", options={...})``: every key is optional; an unknown key, a wrong
type or a value out of range is a ``ValueError`` naming the key and what it takes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class SandboxOptions:
    """One sandbox's policy. Tools whose options are equal share a pool of sandboxes.

    * ``network``: ``True`` shares the agent's network; a list of ``"host:port"`` opens only
      those, through an HTTP ``CONNECT`` proxy (``_proxy.py``); default: no network at all,
      not even the agent's loopback;
    * ``read_only``: absolute paths the handler may read (bound read-only at the same place);
    * ``env``: names passed from the agent's environment, or a mapping of names to values;
      nothing else crosses;
    * ``memory`` (bytes of address space), ``cpu_seconds``, ``file_size`` (bytes),
      ``open_files``, ``processes``: the limits; ``scratch``: bytes of the working directory;
    * ``reuse``: keep a sandbox for the next call (faster; what one call leaves, in memory and
      in scratch, the next one sees) instead of a fresh one per call.
    """

    network: bool | tuple[tuple[str, int], ...] = False
    read_only: tuple[str, ...] = ()
    env: tuple[tuple[str, str | None], ...] = ()  # (name, value), None: the agent's value
    memory: int = 1024 * MIB
    cpu_seconds: int = 10
    file_size: int = 64 * MIB
    open_files: int = 64
    processes: int = 32
    scratch: int = 64 * MIB
    reuse: bool = False

    def environment(self) -> dict[str, str]:
        """The allowed variables with their values now (an agent variable that is unset is
        left out)."""
        out: dict[str, str] = {}
        for name, value in self.env:
            found = os.environ.get(name) if value is None else value
            if found is not None:
                out[name] = found
        return out


_MINIMUMS = {"memory": 64 * MIB, "cpu_seconds": 1, "file_size": 1, "open_files": 16,
             "processes": 4, "scratch": MIB}
"""The least each limit may be: below these the worker itself cannot start a call."""
_BYTES = frozenset({"memory", "file_size", "scratch"})


def _in_mib(value: int) -> str:
    return f" ({value // MIB} MiB)" if value >= MIB else ""


def sandbox_options(tool_name: str, options: Mapping[str, Any] | None) -> SandboxOptions:
    """The checked options of a tool; ``ValueError`` naming what is wrong and what it takes."""
    given = dict(options or {})
    fields = set(SandboxOptions.__dataclass_fields__)
    unknown = sorted(set(given) - fields)
    if unknown:
        raise ValueError(f"tool {tool_name!r}: isolation='sandbox' has no option "
                         f"{', '.join(map(repr, unknown))}; it takes {', '.join(sorted(fields))}")
    where = f"tool {tool_name!r}: sandbox option"
    values: dict[str, Any] = {}
    if "reuse" in given:
        if not isinstance(given["reuse"], bool):
            raise ValueError(f"{where} 'reuse' must be True or False, got {given['reuse']!r}")
        values["reuse"] = given["reuse"]
    if "network" in given:
        values["network"] = _network(where, given["network"])
    for name, least in _MINIMUMS.items():
        if name in given:
            value = given[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                unit = " bytes" if name in _BYTES else ""
                raise ValueError(f"{where} {name!r} must be an int >= {least}{unit}"
                                 f"{_in_mib(least) if unit else ''}, got {value!r}")
            values[name] = value
    if "read_only" in given:
        values["read_only"] = _paths(where, given["read_only"])
    if "env" in given:
        values["env"] = _env(where, given["env"])
    return SandboxOptions(**values)


def _network(where: str, network: Any) -> bool | tuple[tuple[str, int], ...]:
    if isinstance(network, bool):
        return network
    wanted = (f"{where} 'network' must be True, False or a list of \"host:port\" it may "
              f"connect to")
    if isinstance(network, str) or not isinstance(network, list | tuple):
        raise ValueError(f"{wanted}, got {network!r}")
    pairs = []
    for entry in network:
        host, _, port = entry.rpartition(":") if isinstance(entry, str) else ("", "", "")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{wanted}, got {entry!r}")
        pairs.append((host.strip("[]"), int(port)))
    return tuple(sorted(set(pairs)))


def _paths(where: str, paths: Any) -> tuple[str, ...]:
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        raise ValueError(f"{where} 'read_only' must be a list of absolute paths, got {paths!r}")
    for path in paths:
        if not isinstance(path, str) or not os.path.isabs(path):
            raise ValueError(f"{where} 'read_only' takes absolute paths, got {path!r}")
        if not os.path.exists(path):
            raise ValueError(f"{where} 'read_only': {path!r} does not exist")
    return tuple(os.path.normpath(p) for p in paths)


def _env(where: str, env: Any) -> tuple[tuple[str, str | None], ...]:
    if isinstance(env, Mapping):
        pairs = list(env.items())
    elif isinstance(env, list | tuple):
        pairs = [(name, None) for name in env]
    else:
        raise ValueError(f"{where} 'env' must be a list of variable names (their values taken "
                         f"from the agent) or a mapping of names to values, got {env!r}")
    for name, value in pairs:
        if not isinstance(name, str) or not name or "=" in name:
            raise ValueError(f"{where} 'env' takes variable names, got {name!r}")
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where} 'env' {name!r} must map to a str, got {value!r}")
    return tuple(sorted(pairs, key=lambda pair: pair[0]))
