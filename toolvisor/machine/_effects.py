"""The effects a ``TurnMachine`` asks its host to perform, as frozen JSON-able data.

Every effect has an ``id``: the n-th effect of a run has id n, whatever process emits it.
``LlmCall``, ``ToolCalls`` and ``Sleep`` wait for a response with their id; ``Progress`` and
``LogEvent`` are fire-and-forget; ``Done`` (in ``_done``) ends the run.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from toolvisor.contract import ModelRequest, ToolCall

EffectId: TypeAlias = int


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CallToRun(_Frozen):
    """One call to run now: the call, which attempt this is, and the state its ``ctx.state`` reads.

    ``turn`` is the turn whose model response asked for the call (a retry keeps it), so
    ``(turn, attempt, call.id)`` names one attempt within a run even when a model reuses call
    ids across turns. The host gives the handler ``CallContext(tool_call=call, attempt=attempt,
    state=StateView(state))`` and reports ``StateView.writes`` back with the result.
    """

    call: ToolCall
    turn: int
    attempt: int = 1
    state: dict[str, Any] = Field(default_factory=dict)


class LlmCall(_Frozen):
    """Ask the model; answer with ``ModelReplied``, or ``EffectFailed`` with a ``ModelError``
    (which goes to the ``on_model_error`` policy). ``attempt`` counts this turn's tries (the
    request carries it too)."""

    kind: Literal["llm_call"] = "llm_call"
    id: EffectId
    turn: int
    request: ModelRequest
    attempt: int = 1


class ToolCalls(_Frozen):
    """Run these calls (in parallel when there are several); answer with ``ToolResults``.

    The results may come back one by one or together. Re-emitted after a restore, it lists only
    the calls still outstanding, each exactly as first emitted.
    """

    kind: Literal["tool_calls"] = "tool_calls"
    id: EffectId
    calls: tuple[CallToRun, ...]


class Sleep(_Frozen):
    """Wait ``seconds`` before a retry (of ``call_ids``, or of the model call for
    ``reason="model_retry"``); answer with ``Slept``."""

    kind: Literal["sleep"] = "sleep"
    id: EffectId
    seconds: float
    call_ids: tuple[str, ...]
    reason: Literal["tool_retry", "model_retry"] = "tool_retry"


class Progress(_Frozen):
    """Something a user may want to see (``turn_started``, ``call_finished``, ...); no answer."""

    kind: Literal["progress"] = "progress"
    id: EffectId
    event: str
    data: dict[str, Any] = Field(default_factory=dict)


class LogEvent(_Frozen):
    """A lifecycle event for the host's event log (``get_event_log("machine")``); no answer."""

    kind: Literal["log"] = "log"
    id: EffectId
    level: Literal["debug", "info", "warning", "error"]
    event: str
    fields: dict[str, Any] = Field(default_factory=dict)


WaitingEffect: TypeAlias = LlmCall | ToolCalls | Sleep
