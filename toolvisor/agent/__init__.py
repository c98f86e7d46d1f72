"""The ``Agent`` facade and the settings it groups by topic.

``Agent(model, tools)`` is all most programs write; ``Limits``, ``Timeouts``, ``Tracing`` and
``Clocks`` (and ``toolvisor.Durability``) hold the rest, each a frozen dataclass checked when
it is built.
"""

from toolvisor.agent._agent import Agent
from toolvisor.agent._durable_runs import RunOutcome
from toolvisor.agent._settings import Clocks, Limits, Timeouts, Tracing

__all__ = ["Agent", "Clocks", "Limits", "RunOutcome", "Timeouts", "Tracing"]
