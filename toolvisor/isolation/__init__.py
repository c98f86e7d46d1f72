"""Isolation backends: where a call's handler runs (``thread``, ``process``, ``asyncio``,
``ray``, ``sandbox``, or one a third party registers), and the protocol each of them keeps.

A ``ToolRunner`` builds one of each registered backend and hands every call to the backend its
tool's ``isolation`` names; the runner keeps the deadline and settles each call exactly once.
"""

from toolvisor.isolation._asyncio import AsyncioBackend
from toolvisor.isolation._backend import (
    GiveUp,
    IsolationBackend,
    MpContext,
    Runtime,
    backend_named,
    check_hosts,
    register_backend,
    registered_backends,
)
from toolvisor.isolation._process._main_guard import check_main_guard
from toolvisor.isolation._process._pool import ProcessBackend, prepare_process_isolation
from toolvisor.isolation._ray._isolation import RayBackend
from toolvisor.isolation._ray._tools import RayActor
from toolvisor.isolation._running import RunningCall
from toolvisor.isolation._sandbox._backend import SandboxBackend
from toolvisor.isolation._thread import ThreadBackend
from toolvisor.isolation._thread_pool import ElasticThreadPool, PoolThread

register_backend("thread", ThreadBackend)
register_backend("process", ProcessBackend)
register_backend("asyncio", AsyncioBackend)
register_backend("ray", RayBackend)
register_backend("sandbox", SandboxBackend)

__all__ = [
    "AsyncioBackend",
    "ElasticThreadPool",
    "GiveUp",
    "IsolationBackend",
    "MpContext",
    "PoolThread",
    "ProcessBackend",
    "RayActor",
    "RayBackend",
    "RunningCall",
    "Runtime",
    "SandboxBackend",
    "ThreadBackend",
    "backend_named",
    "check_hosts",
    "check_main_guard",
    "prepare_process_isolation",
    "register_backend",
    "registered_backends",
]
