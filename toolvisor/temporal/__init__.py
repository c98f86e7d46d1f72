"""toolvisor on Temporal: an agent's run as a workflow, each model and tool call an activity.

The workflow is the ``TurnMachine`` and a small driver (deterministic, every clock
``workflow.now()``); each tool call runs under toolvisor's ``ToolRunner`` in its tool's own
isolation and timeout, heartbeating from the supervisor's side; activities have one attempt,
so the agent's policies are the only retry authority. ``AskUser`` and ``Pending`` wait in
place for validated updates. Needs the ``temporal`` extra (``pip install '.[temporal]'`` in
toolvisor's clone); ``docs/temporal.md`` shows a whole agent.
"""

try:
    import temporalio  # noqa: F401 - only to say what is missing
except ImportError as missing:  # without the extra: say which
    raise ImportError("toolvisor.temporal needs Temporal's SDK: pip install '.[temporal]' in "
                      "toolvisor's clone") from missing

from toolvisor.temporal._agent import TemporalAgent
from toolvisor.temporal._client import (
    RunHandle,
    UpdateRefusedError,
    answer,
    complete,
    complete_key,
    outcome,
    pending_calls,
    questions,
    start_or_answer,
    start_run,
)
from toolvisor.temporal._codec import FinalOutcome
from toolvisor.temporal._registry import UnknownAgentError
from toolvisor.temporal._servers import dev_server_path, test_server_path
from toolvisor.temporal._worker import AgentWorker, replay
from toolvisor.temporal._workflow import WORKFLOW, AgentRun

__all__ = [
    "WORKFLOW",
    "AgentRun",
    "AgentWorker",
    "FinalOutcome",
    "RunHandle",
    "TemporalAgent",
    "UnknownAgentError",
    "UpdateRefusedError",
    "answer",
    "complete",
    "complete_key",
    "dev_server_path",
    "outcome",
    "pending_calls",
    "questions",
    "replay",
    "start_or_answer",
    "start_run",
    "test_server_path",
]
