"""The run core: ``OrchestratorActor`` drives each run's ``TurnMachine`` and performs its effects
through the other rooms; with a store it keeps one host per run (leases), restores runs and
dates their questions. ``AgentTree`` is the supervision tree it runs in."""

from toolvisor.host.run._loop_reply import LoopReply
from toolvisor.host.run._orchestrator import OrchestratorActor
from toolvisor.host.run._resumed import ResumedSuspensions
from toolvisor.host.run._run_tree import refuse_child
from toolvisor.host.run._settings import OrchestratorSettings
from toolvisor.host.run._tree import AgentTree

__all__ = [
    "AgentTree",
    "LoopReply",
    "OrchestratorActor",
    "OrchestratorSettings",
    "ResumedSuspensions",
    "refuse_child",
]
