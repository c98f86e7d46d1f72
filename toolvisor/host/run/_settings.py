"""``OrchestratorSettings``: what every run hosted by one orchestrator shares, as the ``Agent``
gives it. The orchestrator hands each collaborator only the parts it uses."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolvisor.actors import ToolCallDispatcher
from toolvisor.call import OutputProjection
from toolvisor.durable import RunStore, Signer
from toolvisor.host._protocol import ProgressCallback
from toolvisor.host.calls import ToolGates
from toolvisor.host.models import ModelCalls
from toolvisor.host.observe import RunSpans
from toolvisor.host.processes import Processes
from toolvisor.host.sessions import AgentSessions
from toolvisor.machine import MachineConfig
from toolvisor.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class OrchestratorSettings:
    """What every run hosted by one orchestrator shares.

    ``models`` performs the model calls; ``signer`` signs the ``Suspended`` outcomes given
    out; ``store`` makes runs durable; ``config`` is needed to restore runs from it;
    ``clock`` dates the questions' deadlines (the store's clock, with a store);
    ``lease_ttl`` is how long a run's lease outlives this host's last renewal; ``gates`` are
    the tools' breakers, bulkheads and rate limits (owned by the agent, which reads them);
    ``tracing`` makes the runs' spans (``None``: the agent does not trace); ``processes``
    runs the runs' background processes (``None``: calls get no ``ctx.processes``);
    ``named_models`` are the other models a tool's direct completion may name; ``sessions``
    is the agent as the starter of child sessions (each call's ``ctx.sessions`` is built on it);
    a model call still waiting ``model_warn_after`` seconds after it started is said to the
    user (``None``: never).
    """

    models: ModelCalls
    signer: Signer
    registry: ToolRegistry
    dispatcher: ToolCallDispatcher
    projection: OutputProjection
    context: Any = None
    on_progress: ProgressCallback | None = None
    store: RunStore | None = None
    config: MachineConfig | None = None
    key_poll_interval: float = 0.05
    lease_ttl: float = 30.0
    gates: ToolGates = field(default_factory=ToolGates)
    tracing: RunSpans | None = None
    clock: Callable[[], float] = time.time
    processes: Processes | None = None
    named_models: Mapping[str, ModelCalls] = field(default_factory=dict)
    sessions: AgentSessions | None = None
    model_warn_after: float | None = 30.0
