"""``Crew``: the collaborators of one ``OrchestratorActor``, each built from the part of the
``OrchestratorSettings`` it uses (the one place that reads the whole bag for them).

Built on the orchestrator's thread as it starts; each collaborator belongs to that thread and
reaches the orchestrator only by telling its ``ActorRef``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykka import ActorRef

from toolvisor.executor import DeadlineTimer
from toolvisor.host._mail import tell
from toolvisor.host.calls import CallStarter, FinishedCalls
from toolvisor.host.models import Completions, ModelsInFlight
from toolvisor.host.observe import RunObserver
from toolvisor.host.run._leases import RunLeases
from toolvisor.host.run._questions import Questions
from toolvisor.host.run._settings import OrchestratorSettings
from toolvisor.host.waits import DurableWaits


@dataclass(frozen=True, slots=True)
class Crew:
    """The leases and durable waits (with a store), the observer, the deadline timer (model
    backoffs, retries, completions and notices wait on it), the calls, the model calls and
    the questions of one orchestrator."""

    leases: RunLeases | None
    waits: DurableWaits | None
    observe: RunObserver
    timer: DeadlineTimer
    calls: CallStarter
    models: ModelsInFlight
    questions: Questions

    @classmethod
    def of(cls, settings: OrchestratorSettings, me: ActorRef[Any],
           on_progress: Callable[[str, str, dict[str, Any]], None]) -> Crew:
        """The crew of the orchestrator ``me``; ``on_progress`` is told a hosted run's
        progress that its calls report (a breaker's move)."""
        store, sessions = settings.store, settings.sessions
        told = functools.partial(tell, me)
        leases = None if store is None else RunLeases(store, settings.lease_ttl, told)
        waits = None if store is None or leases is None else DurableWaits(
            store, settings.registry, settings.key_poll_interval, told, leases.token,
            sessions=sessions)
        observe = RunObserver(settings.tracing, settings.on_progress, settings.processes,
                              None if sessions is None else sessions.trace_parent)
        timer = DeadlineTimer("toolvisor-waits")  # its thread starts on the first wait
        completions = Completions.of(settings.models, settings.named_models,
                                     config=settings.config, tracing=settings.tracing,
                                     store=store, timer=timer)
        calls = CallStarter(
            settings.dispatcher, settings.gates, FinishedCalls(settings.projection), me,
            observe, timer=timer, on_progress=on_progress, completions=completions,
            waits=waits, processes=settings.processes, sessions=sessions,
            context=settings.context)
        models = ModelsInFlight(settings.models, me, observe, timer,
                                projection=settings.projection, hidden=settings.gates.hidden,
                                warn_after=settings.model_warn_after)
        questions = Questions(settings.clock, told, store=store, config=settings.config,
                              poll=settings.key_poll_interval)
        return cls(leases, waits, observe, timer, calls, models, questions)
