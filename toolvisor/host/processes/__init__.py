"""The background processes of an agent's runs (``ctx.processes``, ``agent.processes``)."""

from toolvisor.host.processes._process_views import CallProcesses, HostProcesses
from toolvisor.host.processes._processes import Processes

__all__ = ["CallProcesses", "HostProcesses", "Processes"]
