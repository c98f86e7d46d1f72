"""``ending``: a run's final outcome, put together from the run state without validating it.

Every part is the machine's own and already of its type (the transcript's messages, the usage,
the conflicts); validating ``Completed`` again walked the whole transcript, message by message,
once per run (~70 us for 200 messages).
"""

from __future__ import annotations

from typing import Any, TypeVar

from toolvisor.machine._checkpoint import RunState
from toolvisor.machine._outcomes import Completed, Failed, Halted
from toolvisor.machine._trusted import trusted

E = TypeVar("E", Completed, Halted, Failed)

_FROM_RUN = ("run_id", "messages", "turns", "state", "state_conflicts", "usage")


def _own_defaults(cls: type[Completed | Halted | Failed]) -> dict[str, Any]:
    """``cls``'s own fields (not taken from the run) with their defaults (``None`` for a
    required one, which every ending gives)."""
    return {name: None if info.is_required() else info.default
            for name, info in cls.model_fields.items() if name not in _FROM_RUN}


_OWN: dict[type, dict[str, Any]] = {cls: _own_defaults(cls) for cls in (Completed, Halted, Failed)}


def ending(cls: type[E], run: RunState, **own: Any) -> E:
    """An outcome of class ``cls`` with ``own`` fields (its text, reason or error, ...) and the
    run's transcript, turns, a copy of its state, its conflicts and usage, in field order."""
    values = {**_OWN[cls], **own, "run_id": "", "messages": tuple(run.messages),
              "turns": run.turns, "state": dict(run.state),
              "state_conflicts": tuple(run.conflicts), "usage": run.usage}
    return trusted(cls, **{name: values[name] for name in cls.model_fields})
