"""Running handlers: the ``ToolRunner`` (each call's deadline, settled exactly once, handed to
the isolation backend its tool names), its handles, stats and deadline timer."""

from toolvisor.executor._calls import CallHandle
from toolvisor.executor._deadlines import Deadline, DeadlineTimer
from toolvisor.executor._runner import ToolRunner
from toolvisor.executor._stats import RunnerStats

__all__ = [
    "CallHandle",
    "Deadline",
    "DeadlineTimer",
    "RunnerStats",
    "ToolRunner",
]
