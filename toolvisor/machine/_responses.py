"""What the host sends back to a ``TurnMachine``: one response per waiting effect, by id.

Responses carry live objects (a ``HandlerResult`` with the very exception a handler raised), so
a policy sees the real error; the machine keeps only their JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from toolvisor.contract import HandlerResult, ModelResponse, ToolvisorError, Usage
from toolvisor.machine._effects import EffectId


@dataclass(frozen=True, slots=True)
class ModelReplied:
    """The model's answer to ``LlmCall`` ``effect_id``."""

    effect_id: EffectId
    response: ModelResponse


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one call of a ``ToolCalls`` effect went.

    ``result`` is what the executor returned (after ``encode_checked``: an unencodable result is
    already ``Err(ToolError("encoding_failed"))``), ``text`` the model text ``encode_checked``
    made (``None``: the machine encodes it) and ``writes`` the call's ``StateView.writes``.
    ``usage`` is what the call's direct completions spent, added to the run's usage.
    ``membership`` is the catalog edits the call made for its run (tool name -> present, as
    ``ctx.sessions.set_tool_membership`` made them), kept in the run's state: what the run
    offers and may run from then on, in this process or after a restore.
    """

    call_id: str
    result: HandlerResult
    text: str | None = None
    writes: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    membership: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResults:
    """Outcomes for some or all calls of ``ToolCalls`` ``effect_id``; one at a time is fine."""

    effect_id: EffectId
    outcomes: tuple[CallOutcome, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcomes", tuple(self.outcomes))


@dataclass(frozen=True, slots=True)
class Slept:
    """The ``Sleep`` ``effect_id`` is over."""

    effect_id: EffectId


@dataclass(frozen=True, slots=True)
class NotPerformed:
    """The host could not perform effect ``effect_id`` (the model call raised, ...): run fails."""

    effect_id: EffectId
    error: BaseException | str


Response: TypeAlias = ModelReplied | ToolResults | Slept | NotPerformed


class ResponseRefused(ToolvisorError, ValueError):
    """A response the machine cannot take (stale id, wrong type, unknown call); nothing changed."""
