"""``ctx.processes``: background processes a call starts for its run, as the contract sees them.

A process is a handler run like a tool call, but with no model waiting for it: a call starts
it and gets a handle (a JSON-able ``str``) back at once, and any later call of the same run, or
the host, waits for its output, lists the run's processes or cancels one. The host implements
the protocol (``toolvisor.host``); the contract only names it, so it imports no host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from toolvisor.contract._errors import CapabilityError
from toolvisor.contract._results import Err, Ok

ProcessStatus = Literal["running", "ok", "error", "interrupted"]
"""How a process stands: still ``running``; ended with ``Ok`` (``ok``) or ``Err``
(``error``: a reported failure, a crash, a timeout, a cancel); or ``interrupted``: the host
running it died and it was not run again (at most once)."""


class ProcessError(CapabilityError):
    """A use of ``ctx.processes`` (or of ``agent.processes(run_id)``) was refused; ``code``
    says why, stably.

    ``process_unknown_handle`` (no process of this run has that handle), ``process_other_run``
    (the handle is of another run), ``process_call_finished`` (the call that would start it
    has ended), ``process_replay_mismatch`` (a call run again after a crash starts another
    process where it started this one), ``process_not_json`` (with a store, arguments and
    output are JSON), ``process_running_elsewhere`` (another live host runs it: cancel it
    there), ``process_wait_cancelled`` (the waiting call was cancelled).
    """


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process of a run, as ``list()`` reports it (every field JSON-able)."""

    handle: str
    name: str
    status: ProcessStatus
    detached: bool

    def to_dict(self) -> dict[str, Any]:
        """The process as JSON."""
        return {"handle": self.handle, "name": self.name, "status": self.status,
                "detached": self.detached}


@runtime_checkable
class RunProcesses(Protocol):
    """The processes of one run, as its host sees them: wait, list, cancel.

    ``wait`` returns the process's ``Ok`` or ``Err`` (a crash, timeout or cancel is an ``Err``
    of a ``ToolError``, as for a call), or ``None`` if it is still running after ``timeout``
    seconds; ``cancel`` returns whether it was running (it then ends ``Err`` with code
    ``cancelled``).
    """

    def wait(self, handle: str, timeout: float | None = None) -> Ok | Err | None: ...

    async def wait_async(self, handle: str, timeout: float | None = None) -> Ok | Err | None: ...

    def list(self) -> list[ProcessInfo]: ...

    def cancel(self, handle: str) -> bool: ...


@runtime_checkable
class ProcessAccess(RunProcesses, Protocol):
    """``ctx.processes``: the run's processes, as a call sees them; it can also start one.

    ``start(fn, arguments)`` runs ``fn`` (a module-level handler function of arity 1 or 2, or
    a ``Tool``) with ``arguments`` (a dict) in the run's process supervisor, under
    ``isolation`` (any a tool takes: ``thread``, ``process``, ``asyncio``, ``ray``) with its
    ``timeout``, ``options`` and ``retryable`` as a tool has them; ``detached=True`` lets it
    outlive its run. Returns its handle.
    """

    def start(self, fn: Callable[..., Any] | str, arguments: Mapping[str, Any], *,
              isolation: str | None = None, detached: bool = False,
              timeout: float | None = None, retryable: bool = False,
              options: Mapping[str, Any] | None = None) -> str: ...
