"""The test session's one local Ray cluster."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SOCKET = re.compile(r"socket:\[(\d+)\]")
_MAPPED = "0000000000000000FFFF0000"  # /proc/net/tcp6's prefix of an IPv4-mapped address


def _warm_up() -> int:
    return 1


def start_cluster(temp_dir: Path) -> ModuleType:
    """Start a 2-CPU local cluster with its files in ``temp_dir``; fail (never skip) if not."""
    try:
        import ray  # noqa: PLC0415 - the optional extra
    except ImportError as exc:
        pytest.fail(f"Ray is not installed ({exc}); the dev extra installs toolvisor[ray]",
                    pytrace=False)
    try:
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(temp_dir),
                 log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        ray.get(ray.remote(_warm_up).remote(), timeout=60)
    except Exception as exc:
        pytest.fail(f"a local Ray cluster cannot start: {type(exc).__name__}: {exc}",
                    pytrace=False)
    return ray


def _hex_ipv4(address: str) -> str:
    """``/proc/net/tcp``'s spelling of an IPv4 address (little-endian hex)."""
    return "".join(f"{int(part):02X}" for part in reversed(address.split(".")))


def worker_sockets(node_ip: str) -> SocketsTo:
    """What tells the cluster's own TCP connections (to its worker processes) apart."""
    return SocketsTo(_hex_ipv4(node_ip))


class SocketsTo:
    """Accepts the cluster's gRPC connections: a TCP socket with ``TCP_NODELAY`` whose peer is
    the node's address (not ``127.0.0.1``: a test's own local server stays checked), or that is
    in no TCP table (being torn down, or connecting to a worker that just died)."""

    def __init__(self, hex_ip: str) -> None:
        self._hex_ip = hex_ip

    def __call__(self, fd: int, target: str) -> bool:
        match = _SOCKET.fullmatch(target)
        if match is None or self._hex_ip == _hex_ipv4("127.0.0.1") or not _grpc_socket(fd):
            return False
        inode = match.group(1)
        peers = (self._hex_ip, _MAPPED + self._hex_ip)  # IPv4, IPv4-mapped IPv6
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                columns = line.split()
                if columns[9] == inode:
                    return columns[2].split(":")[0] in peers
        return True


def _grpc_socket(fd: int) -> bool:
    """Whether ``fd`` is a TCP socket set up as gRPC sets up its own (``TCP_NODELAY``)."""
    try:
        with socket.socket(fileno=os.dup(fd)) as probe:
            return probe.type == socket.SOCK_STREAM and probe.family in (
                socket.AF_INET, socket.AF_INET6) and bool(
                probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    except OSError:
        return False
