"""One pool of sandboxes per profile: the ``process`` pool, its workers started in bwrap.

The pool's manager thread, its supervision and its deadline kills are the ``process`` pool's;
this one changes what a worker is (a bwrap sandbox, in a ``pids`` cgroup of its own where the
machine allows), how its messages are read (bounded, unpickled under an allow-list:
``_wire.py``), what its exit means (a broken limit, by name) and, unless the profile says
``reuse``, that each sandbox serves one call and is replaced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import CapabilityError, Err, HandlerResult
from toolvisor.isolation._backend import Runtime
from toolvisor.isolation._link._context_server import serve_link
from toolvisor.isolation._link._remote_context import SERVED
from toolvisor.isolation._process._pool import ProcessBackend, Worker, exit_error
from toolvisor.isolation._running import RunningCall
from toolvisor.isolation._sandbox._cgroup import PidsCgroup, pids_root
from toolvisor.isolation._sandbox._child import LIMIT_EXITS
from toolvisor.isolation._sandbox._command import Profile, command, environment
from toolvisor.isolation._sandbox._host import bwrap_path
from toolvisor.isolation._sandbox._proxy import AllowListProxy
from toolvisor.isolation._sandbox._wire import read_message

_log = get_event_log("tool_runner", isolation="sandbox")
_SIGNAL_LIMITS = {signal.SIGXCPU: "cpu_limit", signal.SIGXFSZ: "file_size_limit"}
SANDBOX_SERVED = {**{target: methods for target, methods in SERVED.items()
                     if target != "process_admin"}, "catalog": frozenset({"members"})}
"""What a sandbox's link performs: the call context, but not ``ctx.processes``, which would
run a function the sandbox names in the agent's own process (or anywhere but a sandbox), nor
changes to the catalog, which would widen what the model may call."""


class Sandbox:
    """One running sandbox, with what the pool asks of a worker process: ``pid``,
    ``sentinel`` (a pidfd, readable once bwrap exits), ``exitcode`` (bwrap's ``128 + n`` for
    a worker that died from signal ``n`` is reported as ``-n``, as multiprocessing does),
    ``kill``, ``join`` and ``close``. Killing bwrap kills the sandbox: everything in it has
    bwrap as parent or lives in its pid namespace (``--die-with-parent``)."""

    def __init__(self, argv: list[str], env: dict[str, str], fds: tuple[int, ...],
                 cgroup: PidsCgroup | None) -> None:
        self.cgroup = cgroup
        if cgroup is not None:
            argv = cgroup.join_command(argv)
        self._popen = subprocess.Popen(argv, env=env, pass_fds=fds, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self._popen.pid
        self.sentinel = os.pidfd_open(self.pid)

    @property
    def exitcode(self) -> int | None:
        code = self._popen.poll()
        if code is not None and code > 128:
            return -(code - 128)
        return code

    def kill(self) -> None:
        if self._popen.poll() is None:
            self._popen.kill()

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout)

    def close(self) -> None:
        """Release it once it exited: its pidfd, and its cgroup (anything left in it killed)."""
        os.close(self.sentinel)
        if self.cgroup is not None:
            try:
                self.cgroup.remove()
            except OSError as exc:  # never the pool's end: its manager goes on
                _log.error("sandbox_cgroup_left", path=self.cgroup.path, error=str(exc))


class SandboxPool(ProcessBackend):
    """The sandboxes of one profile: ``runtime.process_workers`` of them, started ahead of
    the calls; each serves one call then is replaced, unless the profile says ``reuse``."""

    stop_wait = 0.0  # a sandbox has nothing to save: closing kills it at once

    def __init__(self, runtime: Runtime, profile: Profile) -> None:
        super().__init__(runtime)
        self._profile = profile
        self._proxy: AllowListProxy | None = None  # written once, as the manager starts

    def _prepare(self) -> None:
        """Start the allow-list proxy if the profile has one (a sandbox starts from bwrap,
        not from multiprocessing's helpers)."""
        network = self._profile.options.network
        if isinstance(network, tuple):
            self._proxy = AllowListProxy(frozenset(network))

    def close(self, grace: float) -> None:
        super().close(grace)
        if self._proxy is not None:
            self._proxy.close()

    def _launch(self, context: BaseContext, name: str, child_end: Connection,
                link_child_end: Connection) -> Sandbox:
        options = self._profile.options
        root = pids_root()
        try:
            cgroup = None if root is None else PidsCgroup(root, options.processes)
        except OSError:  # the controller refused this one: the rlimit stands alone
            cgroup = None
        fds = (child_end.fileno(), link_child_end.fileno())
        try:
            proxy_dir = None if self._proxy is None else self._proxy.directory
            return Sandbox(command(bwrap_path(), self._profile, *fds, proxy_dir),
                           environment(self._profile), fds, cgroup)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise

    def _serve_link(self, conn: Connection, worker: Worker) -> None:
        try:
            serve_link(conn, worker.context, read_message, SANDBOX_SERVED)
        except CapabilityError as exc:  # link_violation: the link thread ends with it
            self._post(("violation", (worker, exc)))

    def _on_message(self, kind: str, payload: Any) -> None:
        worker, exc = payload
        if kind == "violation" and worker in self._workers and not worker.killed:
            self._violated(worker, exc)

    def _violated(self, worker: Worker, exc: CapabilityError) -> None:
        """Kill a sandbox that broke its link's protocol; its call is ``handler_exit``."""
        call = worker.call
        _log.warning("sandbox_violation", pid=worker.process.pid, detail=exc.message,
                     tool_name=call.tool.name if call else None)
        if call is not None:
            self.runtime.settle(call, call.error("handler_exit", exc.message, exc.message,
                                                 code="link_violation"))
        self._kill(worker)

    def _receive(self, worker: Worker) -> None:
        call = worker.call
        assert call is not None
        try:
            result: HandlerResult = read_message(worker.conn)
        except CapabilityError as exc:
            if exc.code == "link_violation":
                self._violated(worker, exc)
            return  # link_closed: the sandbox died, its sentinel is (or soon will be) ready
        broke = self._refused_forks(worker, call)
        with call.lock:
            call.worker = None
        worker.call = None
        if broke is not None or not self._profile.options.reuse:
            worker.killed = True  # retired, not a death: no handler_exit, no workers_killed
            worker.process.kill()
        else:
            self._idle.append(worker)
        self.runtime.settle(call, broke or result)

    def _refused_forks(self, worker: Worker, call: RunningCall) -> Err | None:
        cgroup = worker.process.cgroup
        if cgroup is None or not cgroup.refused_forks():
            return None
        limit = self._profile.options.processes
        return call.error("handler_exit", f"the sandbox tried to run more than {limit} "
                          "processes", limit, code="process_limit")

    def _exit_error(self, worker: Worker, call: RunningCall, code: int | None) -> Err:
        broke = self._refused_forks(worker, call)
        if broke is not None:
            return broke
        limit = LIMIT_EXITS.get(code) if code is not None and code > 0 else None
        if code is not None and code < 0 and -code in _SIGNAL_LIMITS:
            limit = _SIGNAL_LIMITS[signal.Signals(-code)]
        if limit is None:
            return exit_error(call, code)
        return call.error("handler_exit", f"the sandbox broke its {limit.replace('_', ' ')}",
                          code, code=limit)
