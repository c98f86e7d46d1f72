"""The call-context capabilities that do not work on Temporal yet: each use is refused with a
``CapabilityError`` naming it, never served differently from an ``Agent``'s run."""

from __future__ import annotations

from typing import Any, NoReturn

from toolvisor.contract import CapabilityError


class Refused:
    """Stands in a call context for a capability Temporal runs do not have yet: every
    method a handler asks of it raises ``CapabilityError`` ``code``, naming ``what``."""

    def __init__(self, code: str, what: str) -> None:
        self._code = code
        self._what = what

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy, pickle and hasattr probes: plain absence
            raise AttributeError(name)
        return self._refuse

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise CapabilityError(
            self._code, f"{self._what} do not work in a run on Temporal yet "
            "(toolvisor.temporal, phase 1); run this tool on an Agent, or return Pending "
            "and complete it with toolvisor.temporal.complete")


DURABLE_EFFECTS = Refused("durable_effects_unavailable", "durable effects "
                          "(ctx.durable_effects())")
PROCESSES = Refused("processes_unavailable", "background processes (ctx.processes)")
SESSIONS = Refused("sessions_unavailable", "child sessions and catalog edits (ctx.sessions)")
