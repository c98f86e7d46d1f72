"""The unions a host switches on: ``Effect`` (what the machine asks for, ending with the
terminal ``Done``) and ``Outcome`` (how a run ends, which ``Done`` carries)."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from toolvisor.contract import FrozenModel
from toolvisor.machine._checkpoint import Suspended
from toolvisor.machine._effects import EffectId, LlmCall, LogEvent, Progress, Sleep, ToolCalls
from toolvisor.machine._outcomes import Completed, Failed, Halted

Outcome: TypeAlias = Annotated[Completed | Suspended | Halted | Failed,
                               Field(discriminator="kind")]


class Done(FrozenModel):
    """The run is over (or suspended): ``outcome`` says how. No answer."""

    kind: Literal["done"] = "done"
    id: EffectId
    outcome: Outcome


Effect: TypeAlias = LlmCall | ToolCalls | Sleep | Progress | LogEvent | Done
