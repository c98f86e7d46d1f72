"""The tool calls of an agent's runs: started with their contexts (``CallStarter``), passed
through their tools' gates (``ToolGates``), their progress reported, and their replies taken
back (``FinishedCalls``)."""

from toolvisor.host.calls._call_starter import CallStarter
from toolvisor.host.calls._finished_calls import (
    CallDone,
    CallTarget,
    FinishedCalls,
    send_results,
)
from toolvisor.host.calls._gates import ResilienceConfig, ToolGates
from toolvisor.host.calls._tool_performer import ToolCallPerformer
from toolvisor.host.calls._tool_progress import ToolProgress

__all__ = [
    "CallDone",
    "CallStarter",
    "CallTarget",
    "FinishedCalls",
    "ResilienceConfig",
    "ToolCallPerformer",
    "ToolGates",
    "ToolProgress",
    "send_results",
]
