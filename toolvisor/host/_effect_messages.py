"""The messages a run's effects send back to the orchestrator from other threads: a model
backoff's or a tool retry's wake-up, a model call's answer, a streaming model's progress."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pykka import ActorRef

from toolvisor.host._finished_calls import tell
from toolvisor.host._model_calls import ModelAnswer
from toolvisor.host._run import RunMessage
from toolvisor.machine import LlmCall


@dataclass(frozen=True, slots=True)
class Woke(RunMessage):
    """A ``Sleep`` effect's wait (the model call's backoff) is over."""

    effect_id: int


@dataclass(frozen=True, slots=True)
class RetryDue(RunMessage):
    """A tool call's retry waited out its backoff: start it."""

    call_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ModelAnswered(RunMessage):
    """A model call came back, with a response or a ``ModelError``."""

    effect_id: int
    answer: ModelAnswer


@dataclass(frozen=True, slots=True)
class ModelProgress(RunMessage):
    """A streaming model reported progress (a text delta) for a run's call."""

    effect_id: int
    event: str
    data: dict[str, Any]


class ModelReplies:
    """Where a run's model call reports: called with its answer (on the runner's thread), its
    ``progress`` with each report (on the model's thread or loop), each told to the
    orchestrator. One object per call in flight instead of two partials, each with a tuple of
    its arguments (objects the collector tracks while the model thinks)."""

    __slots__ = ("_effect", "_me", "_run_id")

    def __init__(self, me: ActorRef[Any], run_id: str, effect: LlmCall) -> None:
        self._me = me
        self._run_id = run_id
        self._effect = effect

    def __call__(self, answer: ModelAnswer) -> None:
        tell(self._me, ModelAnswered(self._run_id, self._effect.id, answer))

    def progress(self, event: str, data: dict[str, Any]) -> None:
        """A report of the call, with its turn and attempt."""
        effect = self._effect
        tell(self._me, ModelProgress(self._run_id, effect.id, event,
                                     {"turn": effect.turn, "attempt": effect.attempt, **data}))
