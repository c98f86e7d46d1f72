"""``call_context``: the ``CallContext`` a run's host gives one call attempt, built once, whole.

The orchestrator's ``CallStarter`` and the ``ToolCallPerformer`` both build a call's context
here, so a call sees the same ids (its run as ``session_id``, ``<run>/<call>/<attempt>`` as
``request_id``), the same view of the run's state and the same span wherever it is performed;
what each host has to give (child sessions, keys, durable effects, processes, completions) it
passes, the rest stays ``None``. A plain function, called on the thread that starts the call.
"""

from __future__ import annotations

from typing import Any

from toolvisor.contract import (
    NO_DIRECT_COMPLETIONS,
    CallContext,
    CompletionKeys,
    DirectCompletions,
    DurableEffectsAccess,
    ProcessAccess,
    ProgressSink,
    SessionsAccess,
)
from toolvisor.host.observe import ToolSpan
from toolvisor.machine import CallToRun, StateView


def call_context(run_id: str, planned: CallToRun, view: StateView, *, context: Any,
                 span: ToolSpan | None, progress: ProgressSink,
                 sessions: SessionsAccess | None = None,
                 completion_keys: CompletionKeys | None = None,
                 durable: DurableEffectsAccess | None = None,
                 processes: ProcessAccess | None = None,
                 completions: DirectCompletions = NO_DIRECT_COMPLETIONS) -> CallContext:
    """The context of call attempt ``planned`` of run ``run_id``.

    Args:
        run_id: The run the call is of (the context's ``session_id``).
        planned: The call, its turn and attempt.
        view: The call's view of the run's state (its writes go with its outcome).
        context: The application's context (``ctx.context``).
        span: The call's ``execute_tool`` span: the handler's own spans nest under it.
        progress: Where ``ctx.report_progress`` goes.
        sessions: ``ctx.sessions`` (``None``: the call can start no child session).
        completion_keys: ``ctx.completion_keys`` (``None``: the run is not durable).
        durable: ``ctx.durable`` (``None``: the run is not durable).
        processes: ``ctx.processes`` (``None``: the call can start no background process).
        completions: ``ctx.direct_completions`` (by default: the call has no model to ask).
    """
    return CallContext(  # built once, whole (a dataclasses.replace is ~4 us)
        session_id=run_id,
        request_id=f"{run_id}/{planned.call.id}/{planned.attempt}",
        tool_call=planned.call,
        context=context,
        attempt=planned.attempt,
        turn=planned.turn,
        state=view,
        sessions=sessions,
        completion_keys=completion_keys,
        durable=durable,
        trace_scope=None if span is None else span.scope,
        trace_spans=None if span is None else span.remote,
        process_admin=processes,
        progress=progress,
        direct_completions=completions,
    )
