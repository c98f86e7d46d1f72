"""The terminal ``Done`` effect and the unions of outcomes and effects."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from toolvisor.machine._checkpoint import Suspended
from toolvisor.machine._effects import EffectId, LlmCall, LogEvent, Progress, Sleep, ToolCalls
from toolvisor.machine._outcomes import Completed, Failed, Halted

Outcome: TypeAlias = Annotated[Completed | Suspended | Halted | Failed,
                               Field(discriminator="kind")]


class Done(BaseModel):
    """The run is over (or suspended): ``outcome`` says how. No answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["done"] = "done"
    id: EffectId
    outcome: Outcome


Effect: TypeAlias = LlmCall | ToolCalls | Sleep | Progress | LogEvent | Done
