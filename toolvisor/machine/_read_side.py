"""``MachineReadSide``: what a host reads of a ``TurnMachine`` without driving it.

The machine's state is one ``RunState`` owned by the machine; these read it without copying
it (``checkpoint`` and ``state`` return copies), so a host never digs into a checkpoint to learn
a run's turn, its last effect or how it stands.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from toolvisor.contract import ModelRequest, ToolCall
from toolvisor.machine._checkpoint import (
    Checkpoint,
    ModelCallRecord,
    RunState,
    Suspended,
    waiting_calls,
)
from toolvisor.machine._config import MachineConfig
from toolvisor.machine._effects import LlmCall, ToolCalls
from toolvisor.machine._outcomes import RunStatus
from toolvisor.machine._planning import still_running
from toolvisor.machine._trusted import trusted
from toolvisor.machine._unions import Done, Effect


def copy_run(run: RunState) -> RunState:
    """A deep copy that shares the messages: they are frozen, and most of a long run's size
    (the list itself is copied), and the usage (frozen numbers); every other field is deep
    copied, with one memo, field by field (quicker than ``deepcopy`` of the dataclass)."""
    memo: dict[int, Any] = {}
    copied = {name: copy.deepcopy(getattr(run, name), memo) for name in _DEEP_COPIED}
    return RunState(messages=list(run.messages), usage=run.usage, **copied)


_DEEP_COPIED = tuple(f.name for f in dataclasses.fields(RunState)
                     if f.name not in ("messages", "usage"))


class MachineReadSide:
    """The read-only side of a ``TurnMachine``."""

    _config: MachineConfig
    _run: RunState


    @property
    def config(self) -> MachineConfig:
        return self._config

    @property
    def finished(self) -> bool:
        """Whether the run is over (suspended runs are not: they wait for ``resume``)."""
        return self._run.phase == "done"

    @property
    def status(self) -> RunStatus:
        """``running`` (also before ``start``), ``suspended``, or how the run ended; a cancelled
        run is ``cancelled``, not ``halted``."""
        run = self._run
        if run.phase == "suspended":
            return "suspended"
        return "running" if run.final is None else run.final.status

    @property
    def turn(self) -> int:
        """The run's turn: how many model calls it has asked for (0 before ``start``)."""
        return self._run.turns

    @property
    def last_effect_id(self) -> int:
        """The id of the last effect emitted, fire-and-forget ones included (0 before ``start``)."""
        return self._run.next_effect_id - 1

    @property
    def waiting_effect_id(self) -> int | None:
        """The id of the effect waiting for a response (``LlmCall``, ``ToolCalls``, ``Sleep``),
        or ``None``: a host sends a call's result for the newest ``ToolCalls`` effect."""
        effect = self._run.outstanding
        return None if effect is None else effect.id

    def tool_call(self, call_id: str) -> ToolCall:
        """Call ``call_id`` of the current turn's open batch, as the model asked it (a host runs
        a pending call's cancel hook with it); ``KeyError`` for any other id."""
        for record in self._run.calls:
            if record.call.id == call_id:
                return record.call
        raise KeyError(f"no tool call {call_id!r} in turn {self._run.turns}; its calls: "
                       f"{[r.call.id for r in self._run.calls]}")

    def waiting_calls(self) -> dict[str, tuple[int, int]]:
        """The calls the run waits on (suspended), by id, each with its ``(turn, attempt)``."""
        return waiting_calls(self._run)

    def questions_due(self, now: float) -> list[str]:
        """The ids of the waiting calls whose question's deadline is ``now`` or earlier."""
        return [r.call.id for r in self._run.calls if r.status == "suspended"
                and r.question is not None and r.question.expires_at is not None
                and r.question.expires_at <= now]

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the run's committed state."""
        return copy.deepcopy(self._run.state)

    @property
    def membership(self) -> dict[str, bool]:
        """A copy of the run's own catalog edits (tool name -> present) over the catalog's
        membership: what its calls set with ``ctx.sessions.set_tool_membership``."""
        return dict(self._run.membership)

    @property
    def outstanding(self) -> Effect | None:
        """The effect waiting for a response, or the ``Done`` effect; ``None`` before ``start``.

        For a partly answered ``ToolCalls`` only the calls still running are listed, each as
        first emitted.
        """
        run = self._run
        if run.phase in ("suspended", "done"):
            return self._done_effect()
        effect = run.outstanding
        if isinstance(effect, ModelCallRecord):
            return LlmCall(id=effect.id, turn=effect.turn, attempt=effect.attempt,
                           request=ModelRequest(messages=tuple(run.messages), tools=effect.tools,
                                                attempt=effect.attempt))
        if isinstance(effect, ToolCalls):
            return still_running(run, effect)
        return effect

    def reemit(self) -> list[Effect]:
        """The outstanding effect again (after a restore), same id and payload; ``[]`` if none."""
        effect = self.outstanding
        return [] if effect is None else [effect]

    def checkpoint(self) -> Checkpoint:
        """The whole state as versioned JSON-able data (``to_json()``); never pickled."""
        return Checkpoint(run=copy_run(self._run))

    def _done_effect(self) -> Done:
        run = self._run
        assert run.done_effect_id is not None
        outcome = run.final if run.final is not None else self._suspended()
        return trusted(Done, kind="done", id=run.done_effect_id, outcome=outcome)

    def _suspended(self) -> Suspended:
        return Suspended(checkpoint=self.checkpoint())
