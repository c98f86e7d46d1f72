"""``CallStarter``: what the host hands the dispatcher for each call of a ``ToolCalls`` effect,
and the request it sends the model.

Each planned call gets its context (ids, attempt, state view, catalog access, and in durable
runs its completion keys, durable effects and cancel token) and is started in its own
``ToolCallActor``, unless it left the catalog (``not_found``) or a restored run finds it
interrupted and it may not run twice (at most once). Runs on the orchestrator's thread, which
owns the ``HostedRun`` it writes to (``run.calls``).
"""

from __future__ import annotations

import functools
from typing import Any

from pykka import ActorRef

from toolvisor.actors import CallReply
from toolvisor.contract import CallContext, Err, HandlerResult, ModelRequest, ToolResultMessage
from toolvisor.executor import OutputProjection, encode_checked
from toolvisor.host._commands import OrchestratorSettings
from toolvisor.host._durable_waits import DurableWaits, interrupted_error
from toolvisor.host._finished_calls import CallTarget, FinishedCalls, output_window
from toolvisor.host._run import HostedRun
from toolvisor.machine import StateView, ToolCalls
from toolvisor.registry import ToolRegistry


def request_for_model(registry: ToolRegistry, projection: OutputProjection,
                      request: ModelRequest) -> ModelRequest:
    """The catalog decides which tools the model sees; the budget may bound tool texts."""
    messages = request.messages
    if projection.applies_at("request"):
        messages = tuple(
            m.model_copy(update={"content": projection.project(
                "request", m.content, window=output_window(registry, m.name),
                is_error=m.is_error)})
            if isinstance(m, ToolResultMessage) else m
            for m in messages
        )
    # Every part is a validated model already: validating them again costs ~1 ms a turn.
    return ModelRequest.model_construct(messages=messages, tools=registry.specs())


class CallStarter:
    """Starts the calls of the runs one orchestrator hosts; replies go to ``finished``."""

    def __init__(self, settings: OrchestratorSettings, waits: DurableWaits | None,
                 finished: FinishedCalls, me: ActorRef[Any]) -> None:
        self._settings = settings
        self._waits = waits
        self._finished = finished
        self._me = me

    def start(self, run: HostedRun, effect: ToolCalls) -> None:
        """Start every call of ``effect``; each one's reply reaches the orchestrator once."""
        settings, waits = self._settings, self._waits
        registry = settings.registry
        for planned in effect.calls:
            view = StateView(planned.state)
            token = keys = durable = None
            if waits is not None:
                token, keys, durable = waits.capabilities(run, effect.id, planned)
            ctx = CallContext(
                session_id=run.run_id,
                request_id=f"{run.run_id}/{planned.call.id}/{planned.attempt}",
                tool_call=planned.call,
                context=settings.context,
                attempt=planned.attempt,
                state=view,
                catalog=registry.catalog_access,
                completion_keys=keys,
                durable=durable,
            )
            reply = functools.partial(self._finished.on_reply,
                                      CallTarget(self._me, run.run_id, effect.id, view, ctx,
                                                 token))
            tool = registry.resolve(planned.call.name, ctx)
            result: HandlerResult
            if isinstance(tool, Err):  # left the catalog: not_found, the handler never runs
                result = tool
            elif effect.id == run.interrupted and waits is not None \
                    and not waits.may_run_again(run, tool, planned):
                result = Err(interrupted_error(planned.call))
            else:
                actor = settings.dispatcher.start_call(tool, planned.call, ctx, reply)
                if actor is not None:
                    run.calls[effect.id, planned.call.id] = actor
                continue
            reply(CallReply(planned.call.id, planned.call.name, result,
                            encode_checked(result)[1]))
