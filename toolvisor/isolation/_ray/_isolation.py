"""``ray`` isolation: calls run as Ray tasks on the cluster this process is connected to.

Ray is imported when the first ``ray`` call starts (``toolvisor[ray]``). If the program has not
connected (``ray.init(address=...)``), a local cluster is started then, once per process, and
shut down when the last runner that used it closes; its workers get the driver's import path
(``PYTHONPATH``), so a handler the driver imported from its own folders loads there too. A
task carries a copy of its tool with only what the handler needs; the task runs it through
``execute`` and sends back the pickled result, as a worker process does. The calls of a tool
without Ray options that start together share tasks (``_batches.py``); a tool with options
gets a task per call, the runner told when its future completes (no thread waits per call),
and at the deadline that task is cancelled with ``force=True`` (its worker process killed).
The handler's context is served over a link the task opens back to this process
(``_links.py``), on the address Ray knows this node by, or on ``$TOOLVISOR_RAY_LINK_HOST``
(for a driver the workers reach by another address). A ``RayActor`` tool's call goes to its
actor instead (``_actors.py``), which a deadline kills.
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from types import ModuleType
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.call import prepare_arguments
from toolvisor.contract import Err, HandlerResult, Tool
from toolvisor.isolation._backend import IsolationBackend, Runtime
from toolvisor.isolation._link._remote_context import RemoteCall
from toolvisor.isolation._ray._actors import ActorCall, RayActors
from toolvisor.isolation._ray._batches import RayBatches, Seat
from toolvisor.isolation._ray._links import LINK_HOST_VARIABLE, LinkAddress, RayContextLinks
from toolvisor.isolation._ray._task import CallFields, run_task
from toolvisor.isolation._ray._tools import actor_of, check_ray_tool, shipped_tool, task_options
from toolvisor.isolation._running import RunningCall

_log = get_event_log("tool_runner", isolation="ray")
_cluster_lock = threading.Lock()
_users = 0  # runners that use the cluster now (guarded by _cluster_lock)
_started_here = False  # whether toolvisor started the local cluster (guarded by _cluster_lock)


def import_ray() -> ModuleType:
    """The ``ray`` module, or an ``ImportError`` naming the extra that installs it."""
    try:
        import ray  # noqa: PLC0415 - an optional dependency, imported when first needed
    except ImportError as exc:
        raise ImportError("isolation='ray' needs Ray: pip install '.[ray]' in toolvisor's "
                          "clone") from exc
    return ray


def driver_import_path() -> str:
    """The driver's own import path as a ``PYTHONPATH``: every ``sys.path`` folder that a fresh
    interpreter would not have (the script's folder, the working directory, what the program
    or pytest added), leaving out the interpreter's own library and site-packages."""
    own = tuple(os.path.join(os.path.realpath(prefix), "")
                for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    folders: list[str] = []
    for entry in sys.path:
        folder = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(folder) and not os.path.join(folder, "").startswith(own) \
                and folder not in folders:
            folders.append(folder)
    return os.pathsep.join(folders)


def _connect() -> ModuleType:
    """Join the cluster the program connected to, or start a local one (once per process)."""
    global _users, _started_here  # noqa: PLW0603 - one cluster connection per process
    ray = import_ray()
    with _cluster_lock:
        if not ray.is_initialized():
            ray.init(log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": driver_import_path()}})
            _started_here = True
            _log.info("ray_cluster_started")
        _users += 1
    return ray


def _disconnect(ray: ModuleType) -> None:
    """The last user of a cluster toolvisor started shuts it down."""
    global _users, _started_here  # noqa: PLW0603
    with _cluster_lock:
        _users -= 1
        if _users == 0 and _started_here:
            _started_here = False
            ray.shutdown()
            _log.info("ray_cluster_stopped")


class RayBackend(IsolationBackend):
    """Submits calls as Ray tasks; ``call.worker`` is the task's ``ObjectRef`` while it runs.

    Arguments are validated here (a bad call never costs a task); the task's handler gets
    what a ``process`` one gets, its context served over a link the task opens back to this
    process (``_links.py``).
    """

    @classmethod
    def check(cls, tool: Tool) -> None:
        check_ray_tool(tool)

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._lock = threading.Lock()  # guards _ray, _task and _links
        self._ray: ModuleType | None = None
        self._task: Any = None
        self._links: RayContextLinks | None = None
        self._actors = RayActors()
        self._batches = RayBatches(runtime, _outcome)

    def _remote(self) -> tuple[ModuleType, Any, RayContextLinks]:
        with self._lock:
            if self._ray is None:
                ray = self._ray = _connect()
                self._task = ray.remote(run_task)
                self._links = RayContextLinks(os.environ.get(LINK_HOST_VARIABLE)
                                              or ray.util.get_node_ip_address())
                self._batches.connect(ray, self._links)
            assert self._links is not None
            return self._ray, self._task, self._links

    def submit(self, call: RunningCall) -> None:
        prepared = prepare_arguments(call.tool, call.arguments)
        refused = prepared if isinstance(prepared, Err) else self._send(call)
        if refused is not None:
            self.runtime.settle_soon(call, refused)

    def _send(self, call: RunningCall) -> Err | None:
        """Start ``call``'s task; an ``Err`` if it cannot be sent."""
        ray, task, links = self._remote()
        remote = RemoteCall.of(call.ctx)
        try:
            address = links.address_for(call, remote.tag)
        except RuntimeError as exc:  # no address to listen on, or the runner is closing
            return call.error("handler_exit", str(exc), repr(exc), code="not_started")
        fields: CallFields = (remote, address)
        if not call.tool.options:  # no Ray options, no actor: sent in a batch
            if self._batches.submit(call, fields):
                return None
            links.forget(address)
            return call.error("handler_exit", "the runner is closing", "closing",
                              code="not_started")
        worker: Any
        try:
            if actor_of(call.tool) is not None:
                worker = self._actors.submit(ray, call, fields)
                if isinstance(worker, Err):
                    return worker
                ref = worker.ref
            else:
                options = {"max_retries": 0, "retry_exceptions": False,
                           **task_options(call.tool)}
                ref = worker = task.options(**options).remote(shipped_tool(call.tool),
                                                              call.arguments, fields)
        except Exception as exc:
            links.forget(address)
            return call.error("encoding_failed",
                              f"the call cannot be sent to Ray: {type(exc).__name__}: {exc}",
                              f"{type(exc).__name__}: {exc}")
        with call.lock:
            cancelled = call.settled  # cancelled while it was being sent
            if not cancelled:
                call.worker = worker
        if cancelled:
            links.forget(address)
            self._kill(ray, worker)
            return None
        self.runtime.arm(call)
        ref.future().add_done_callback(
            lambda done: self._done(call, ray, worker, (links, address), done))
        return None

    def _done(self, call: RunningCall, ray: ModuleType, worker: Any,
              link: tuple[RayContextLinks, LinkAddress], done: Future[Any]) -> None:
        """The task's future completed (on a Ray thread): settle the call from its outcome."""
        with call.lock:
            killed = call.worker is None  # stop() took it
            call.worker = None
        links, address = link
        links.forget(address)
        call.token.set()  # the task is over: a request still served for it stops waiting
        result = _outcome(call, done.result)
        if isinstance(worker, ActorCall) and not killed and isinstance(
                done.exception(), ray.exceptions.ActorDiedError):
            self._actors.died(worker)
        self.runtime.settle(call, result)

    def _kill(self, ray: ModuleType, worker: Any) -> None:
        if isinstance(worker, Seat):
            self._batches.stop(worker)
            return
        if isinstance(worker, ActorCall):
            self._actors.kill(ray, worker)
        else:
            ray.cancel(worker, force=True)
        self.runtime.count("workers_killed")

    def stop(self, call: RunningCall) -> None:
        """Cancel ``call``'s task, killing its worker (called once the call was claimed)."""
        with call.lock:
            worker, call.worker = call.worker, None
        if worker is None or self._ray is None:
            return
        self._kill(self._ray, worker)
        if not isinstance(worker, Seat):  # a batch logs when its task is cancelled
            _log.warning("ray_task_cancelled", tool_name=call.tool.name,
                         tool_call_id=call.ctx.tool_call_id)

    def close(self, grace: float) -> None:
        """Leave the cluster (shutting it down if toolvisor started it and nobody else uses it)."""
        with self._lock:
            ray, self._ray = self._ray, None
            links, self._links = self._links, None
        if ray is not None:
            self._actors.close(ray)
            self._batches.close()
            _disconnect(ray)
        if links is not None:
            links.close()


def _outcome(call: RunningCall, fetch: Callable[[], bytes]) -> HandlerResult:
    """``call``'s result from fetching its task's output (Ray's errors mapped to the reasons)."""
    errors = import_ray().exceptions
    try:
        data = fetch()
    except errors.RayTaskError as exc:  # the task itself raised: unwrap Ray's wrapper
        cause = exc.cause if exc.cause is not None else exc
        if isinstance(cause, errors.RaySystemError):  # the task's arguments did not load
            return _not_loaded(call, cause)
        return call.error("handler_raised", f"{type(cause).__name__}: {cause}", cause)
    except errors.TaskCancelledError:
        return call.cancelled_error()
    except (errors.WorkerCrashedError, errors.ActorDiedError) as exc:
        return call.error("handler_exit", f"the Ray worker died: {type(exc).__name__}",
                          type(exc).__name__)
    except errors.RayError as exc:  # the node, the object store: the task's process is gone
        return call.error("handler_exit", f"{type(exc).__name__}: {exc}", type(exc).__name__)
    try:
        result: HandlerResult = pickle.loads(data)
    except Exception as exc:
        return call.error("encoding_failed",
                          f"the result from the Ray task cannot be unpickled: "
                          f"{type(exc).__name__}: {exc}", f"{type(exc).__name__}: {exc}")
    return result


_NO_MODULE = re.compile(r"No module named '([^']+)'")


def _not_loaded(call: RunningCall, error: Exception) -> HandlerResult:
    """The worker could not load what the task carries (the handler's module, most often):
    the handler never ran, so it is ``handler_exit`` ``not_started``, with the fix."""
    missing = _NO_MODULE.search(str(error))
    what = f"cannot import module {missing.group(1)!r}" if missing else "cannot load the call"
    lines = str(error).strip().splitlines()
    last = lines[-1].strip("\"' ") if lines else repr(error)
    return call.error(
        "handler_exit",
        f"the Ray worker {what}, so the handler never ran ({last}). "
        f"Give the cluster's workers the handler's import path: ray.init(runtime_env="
        f"{{'env_vars': {{'PYTHONPATH': ...}}}}) or runtime_env's 'working_dir' / 'py_modules' "
        f"(or per tool: options={{'runtime_env': ...}})",
        type(error).__name__, code="not_started")
