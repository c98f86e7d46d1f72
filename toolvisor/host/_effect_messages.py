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


def tell_answer(me: ActorRef[Any], run_id: str, effect_id: int, answer: ModelAnswer) -> None:
    """On the runner's thread: hand a model call's answer to the orchestrator."""
    tell(me, ModelAnswered(run_id, effect_id, answer))


def tell_progress(me: ActorRef[Any], run_id: str, effect: LlmCall, event: str,
                   data: dict[str, Any]) -> None:
    """On the model's thread or loop: hand its progress to the orchestrator, with the turn."""
    tell(me, ModelProgress(run_id, effect.id, event,
                            {"turn": effect.turn, "attempt": effect.attempt, **data}))
