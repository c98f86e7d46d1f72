"""The effects a ``TurnMachine`` asks its host to perform, as frozen JSON-able data.

Every effect has an ``id``: the n-th effect of a run has id n, whatever process emits it.
``LlmCall``, ``ToolCalls`` and ``Sleep`` wait for a response with their id; ``Progress`` and
``LogEvent`` are fire-and-forget; ``Done`` (in ``_done``) ends the run.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import Field

from toolvisor.contract import FrozenModel, ModelRequest, ToolCall

EffectId: TypeAlias = int


class Backoff(FrozenModel):
    """How long a retry waits before it starts: ``seconds`` counted from when effect ``since``
    (the ``ToolCalls`` effect that first listed the retry, emitted as its previous attempt's
    failure was taken) was emitted. A host that restores the run waits only what is left."""

    seconds: float = Field(ge=0)
    since: EffectId


class CallToRun(FrozenModel):
    """One call to run: the call, which attempt this is, and the state its ``ctx.state`` reads.

    ``turn`` is the turn whose model response asked for the call (a retry keeps it), so
    ``(turn, attempt, call.id)`` names one attempt within a run even when a model reuses call
    ids across turns. The host gives the handler ``CallContext(tool_call=call, attempt=attempt,
    state=StateView(state))`` and reports ``StateView.writes`` back with the result. A retry
    carries its ``backoff``: the host starts it once that is over, whatever its siblings do.
    """

    call: ToolCall
    turn: int
    attempt: int = 1
    state: dict[str, Any] = Field(default_factory=dict)
    backoff: Backoff | None = None


class LlmCall(FrozenModel):
    """Ask the model; answer with ``ModelReplied``, or ``NotPerformed`` with a ``ModelError``
    (which goes to the ``on_model_error`` policy). ``attempt`` counts this turn's tries (the
    request carries it too)."""

    kind: Literal["llm_call"] = "llm_call"
    id: EffectId
    turn: int
    request: ModelRequest
    attempt: int = 1


class ToolCalls(FrozenModel):
    """Run these calls (in parallel when there are several); answer with ``ToolResults``.

    The results may come back one by one or together. When a call fails and is retried while
    others of its step still run, a new ``ToolCalls`` effect *supersedes* this one: it lists the
    calls still running, each exactly as first emitted (they go on: never start one again), and
    the retry with its ``backoff``. Results are always sent for the newest one, its
    predecessors' calls included. Re-emitted after a restore, it lists only the calls still
    outstanding, each exactly as first emitted.
    """

    kind: Literal["tool_calls"] = "tool_calls"
    id: EffectId
    calls: tuple[CallToRun, ...]


class Sleep(FrozenModel):
    """Wait ``seconds`` before the model call's retry; answer with ``Slept``. (A tool call's
    retry waits on its own: its ``CallToRun.backoff``, so its siblings never wait for it.)"""

    kind: Literal["sleep"] = "sleep"
    id: EffectId
    seconds: float
    reason: Literal["model_retry"] = "model_retry"


class Progress(FrozenModel):
    """Something a user may want to see (``turn_started``, ``call_finished``, ...); no answer."""

    kind: Literal["progress"] = "progress"
    id: EffectId
    event: str
    data: dict[str, Any] = Field(default_factory=dict)


class LogEvent(FrozenModel):
    """A lifecycle event for the host's event log (``get_event_log("machine")``); no answer."""

    kind: Literal["log"] = "log"
    id: EffectId
    level: Literal["debug", "info", "warning", "error"]
    event: str
    fields: dict[str, Any] = Field(default_factory=dict)


WaitingEffect: TypeAlias = LlmCall | ToolCalls | Sleep
