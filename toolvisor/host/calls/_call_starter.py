"""``CallStarter``: what the host hands the dispatcher for each call of a ``ToolCalls`` effect.

Each planned call gets its context (ids, attempt, state view, its ``ctx.sessions``, and in durable
runs its completion keys, durable effects and cancel token) and is started in its own
``ToolCallActor``, unless it left the catalog (``not_found``) or a restored run finds it
interrupted and it may not run twice (at most once); a call of a guarded tool passes its gate
first. A retry waits out its own backoff first (on the orchestrator's deadline timer, whose
callback only tells the orchestrator), so it never waits for a sibling. A call an effect lists
again (a superseding ``ToolCalls`` effect keeps the calls still running) is not started twice.
It also takes the finished calls back, undoing what it kept for them. It keeps, by run id,
what it started for each run (``RunCalls``), so that stopping the run's work stops it all. Runs
on the orchestrator's thread, which owns that state. Each context also gets the call's direct
completions (``CallCompletions``), ended with the call.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any

from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor._one_shot import OneShotEvent
from toolvisor.actors import CallReply, ToolCallDispatcher
from toolvisor.contract import CallContext, Err, OutputWindow, Tool, ToolCall
from toolvisor.executor import Deadline, DeadlineTimer
from toolvisor.host._hosted_run import HostedRun
from toolvisor.host._mail import tell
from toolvisor.host._protocol import RetryDue
from toolvisor.host.calls._call_context import call_context
from toolvisor.host.calls._finished_calls import CallTarget, FinishedCalls
from toolvisor.host.calls._gates import GatedCall, GatedCalls, ToolGates, answer
from toolvisor.host.calls._tool_progress import ToolProgress
from toolvisor.host.models import Completions
from toolvisor.host.observe import RunObserver
from toolvisor.host.processes import CallProcesses, Processes
from toolvisor.host.sessions import AgentSessions, CallSessions
from toolvisor.host.waits import DurableWaits, durable_call_id, interrupted_error
from toolvisor.machine import CallOutcome, CallToRun, StateView, ToolCalls


@dataclass(frozen=True, slots=True)
class BackingOff:
    """A retry waiting out its backoff; its deadline tells the orchestrator to start it."""

    planned: CallToRun
    reemitted: bool  # listed by the effect a restored run re-emitted (at most once applies)
    deadline: Deadline


@dataclass(eq=False, slots=True)
class RunCalls:
    """What ``CallStarter`` started for one run and has not taken back, by call id."""

    handed: dict[str, int] = field(default_factory=dict)  # the attempt the host was handed,
    # until its reply is taken: a superseding ToolCalls effect lists it again (at most one
    # attempt of a call id is in flight: a retry follows its failure's reply)
    backing_off: dict[str, BackingOff] = field(default_factory=dict)
    tokens: dict[str, threading.Event] = field(default_factory=dict)  # each call's cancel
    # token (its durable effects' and its ctx.processes'), set when it ends
    actors: dict[str, ActorRef[Any]] = field(default_factory=dict)  # each running call's
    # actor, stopped (the call cancelled) when the run's work stops
    sessions: dict[str, CallSessions] = field(default_factory=dict)  # each call's children,
    # ended (cancelled) when its reply is taken or the run's work stops

    def stop_work(self, *, run_goes_on: bool = False) -> None:
        """Cancel every backoff, stop every call's actor (its ``ctx.cancelled`` is set at
        once) and set every cancel token (ending its durable waits); a run that goes on
        elsewhere or later keeps the children its calls relay waiting (``CallSessions.end``)."""
        for actor in self.actors.values():
            with contextlib.suppress(ActorDeadError):
                actor.stop(block=False)
        for retry in self.backing_off.values():
            retry.deadline.cancel()
        for token in self.tokens.values():
            token.set()
        for sessions in self.sessions.values():
            sessions.end(run_stopped=True, run_goes_on=run_goes_on)


class CallStarter:
    """Starts the calls of the runs one orchestrator hosts; replies go to ``finished``.

    A call of a guarded tool passes its gate first (``GatedCalls``): it may wait there, or be
    refused without running; a breaker's move is told to ``on_progress``. A retry's backoff
    runs on ``timer``.

    Args:
        dispatcher: Starts each call in its own ``ToolCallActor``.
        gates: The agent's tool gates.
        finished: Where the calls' replies are kept for the orchestrator.
        me: The orchestrator, told retries and gate wake-ups that are due.
        observe: Makes each call's span.
        timer: The deadline timer retries wait on.
        on_progress: Told a breaker's move, ``(run_id, event, data)``.
        completions: What each call's direct completions share.
        waits: The durable waits (``None``: the runs are not durable).
        processes: Runs the calls' background processes (``None``: no ``ctx.processes``).
        sessions: The agent as the starter of child sessions (``None``: no ``ctx.sessions``).
        context: The application's context every call is given.
    """

    def __init__(self, dispatcher: ToolCallDispatcher, gates: ToolGates,
                 finished: FinishedCalls, me: ActorRef[Any], observe: RunObserver, *,
                 timer: DeadlineTimer, on_progress: Callable[[str, str, dict[str, Any]], None],
                 completions: Completions, waits: DurableWaits | None,
                 processes: Processes | None, sessions: AgentSessions | None,
                 context: Any) -> None:
        self._dispatcher = dispatcher
        self._gates = gates
        self._waits = waits
        self._finished = finished
        self._me = me
        self._tell = functools.partial(tell, me)
        self._observe = observe
        self._timer = timer
        self._processes = processes
        self._sessions = sessions
        self._context = context
        self._runs: dict[str, RunCalls] = {}
        self._gated = GatedCalls(gates, self._launch, me, on_progress)
        self._completions = completions
        self._log = get_event_log("orchestrator")

    def gate_woke(self, ticket: int) -> None:
        """A call's wait at its tool's gate is over."""
        self._gated.woke(ticket)

    def stop_work(self, run_id: str, *, run_goes_on: bool = False) -> None:
        """Stop everything started for the run: its calls waiting at their gates are
        withdrawn, its backoffs cancelled, its running calls cancelled; the children its calls
        relay are cancelled too, unless the run goes on elsewhere or later (``run_goes_on``:
        they wait on with it)."""
        self._gated.stop_work(run_id)
        calls = self._runs.pop(run_id, None)
        if calls is not None:
            calls.stop_work(run_goes_on=run_goes_on)

    def close(self) -> None:
        """The orchestrator stops (its runs were handed back): the gates hold nothing of it."""
        self._gated.close()

    def start(self, run: HostedRun, effect: ToolCalls) -> None:
        """Start every call of ``effect`` the run was not handed yet, each once its backoff
        is over; each one's reply reaches the orchestrator once.

        A restored run re-emits its effect (``run.reemitted``): a backoff there counts from
        when the effect that scheduled it was emitted, so the retry waits only what is left;
        its background processes whose host died are recovered first (at most once).
        """
        reemitted = effect.id == run.reemitted
        if reemitted and self._processes is not None:  # its processes whose host died: run
            self._processes.recover(run.run_id)  # again, or interrupted
        calls = self._runs.setdefault(run.run_id, RunCalls())
        for planned in effect.calls:
            call_id = planned.call.id
            if calls.handed.get(call_id) == planned.attempt:
                continue  # listed again by a superseding effect: it runs already
            calls.handed[call_id] = planned.attempt
            backoff = planned.backoff
            seconds = 0.0 if backoff is None else backoff.seconds
            if backoff is not None and reemitted and self._waits is not None:
                seconds -= self._waits.waited(run.run_id, backoff.since)
            if backoff is not None:
                self._log.debug("retry_waiting", run_id=run.run_id, tool_call_id=call_id,
                                attempt=planned.attempt, seconds=max(0.0, seconds))
            if seconds <= 0:
                self._start(run, planned, reemitted)
                continue
            deadline = self._timer.schedule(seconds, functools.partial(
                tell, self._me, RetryDue(run.run_id, call_id, planned.attempt)))
            calls.backing_off[call_id] = BackingOff(planned, reemitted, deadline)

    def retry_due(self, run: HostedRun, call_id: str, attempt: int) -> None:
        """A retry's backoff is over: start it (unless the run let it go meanwhile)."""
        calls = self._runs.get(run.run_id)
        waiting = None if calls is None else calls.backing_off.get(call_id)
        if calls is not None and waiting is not None and waiting.planned.attempt == attempt:
            del calls.backing_off[call_id]
            self._start(run, waiting.planned, waiting.reemitted)

    def take_finished(self, hosted: Container[str], crash: Callable[[str, Exception], None]
                      ) -> dict[str, tuple[CallOutcome, ...]]:
        """Every call finished since the last take, by run: its gate and its run let it go, and
        in a durable run still ``hosted`` its key is parked or revoked (what fails there goes
        to ``crash``)."""
        taken: dict[str, list[CallOutcome]] = {}
        for done in self._finished.drain():
            self._gated.finished(done.ticket, done.outcome.result)
            calls = self._runs.get(done.run_id)
            if calls is not None:
                call_id = done.outcome.call_id
                calls.handed.pop(call_id, None)
                calls.tokens.pop(call_id, None)
                calls.actors.pop(call_id, None)
                if (sessions := calls.sessions.pop(call_id, None)) is not None \
                        and sessions.end():  # the call ended: so do the children it left
                    calls.sessions[call_id] = sessions  # but one whose key it relays: that
                    # child is linked until the run's work stops
            if done.run_id in hosted and self._waits is not None:
                try:
                    self._waits.settle_key(done.run_id, done.outcome, done.key)
                except Exception as exc:
                    crash(done.run_id, exc)
            taken.setdefault(done.run_id, []).append(done.outcome)
        return {run_id: tuple(outcomes) for run_id, outcomes in taken.items()}

    def _start(self, run: HostedRun, planned: CallToRun, reemitted: bool) -> None:
        """Give one call its context and start it (or answer it at once if it cannot run)."""
        waits, processes, sessions_of = self._waits, self._processes, self._sessions
        view = StateView(planned.state)
        keys = durable = None
        token: threading.Event | None = None  # only made where someone reads it
        if waits is not None:
            token, keys, durable = waits.capabilities(run.run_id, planned)
        elif processes is not None:
            token = OneShotEvent()  # set when the call ends: its ctx.processes then refuses
        if token is not None:
            self._runs.setdefault(run.run_id, RunCalls()).tokens[planned.call.id] = token
        call_processes = None if processes is None or token is None else CallProcesses(
            processes, run.run_id,
            durable_call_id(planned.turn, planned.attempt, planned.call.id), token, planned.turn)
        sessions = None if sessions_of is None else CallSessions(
            run_id=run.run_id, call_id=planned.call.id, starter=sessions_of,
            catalog=run.catalog, durable=durable, keys=keys)
        tool = run.catalog.resolve(planned.call.name, CallContext(tool_call=planned.call))
        # (not_found: the handler never runs; the context only names the call in that error)
        if not isinstance(tool, Err) and reemitted and waits is not None \
                and not waits.may_run_again(run.run_id, tool, planned):
            tool = Err(interrupted_error(planned.call))
        ticket = None if isinstance(tool, Err) else self._gates.ticket(tool.name)
        name, isolation = (planned.call.name, "none") if isinstance(tool, Err) \
            else (tool.name, tool.isolation or "none")
        window: OutputWindow = "head" if isinstance(tool, Err) else tool.output_window
        span = self._observe.tool_call(run.run_id, planned, name, isolation)
        if span is not None and sessions is not None:  # its children's runs nest under it
            sessions.trace_scope = span.scope
        if sessions is not None and not isinstance(tool, Err):
            self._runs.setdefault(run.run_id, RunCalls()).sessions[planned.call.id] = sessions
        ctx = call_context(
            run.run_id, planned, view, context=self._context, span=span,
            progress=ToolProgress(self._tell, run.run_id, planned, name, span),
            sessions=sessions, completion_keys=keys, durable=durable, processes=call_processes,
            completions=self._completions.for_call(
                run.run_id, planned, None if waits is None else durable_call_id(
                    planned.turn, planned.attempt, planned.call.id), span,
                None if durable is None else durable.fence))
        reply = CallTarget(self._finished, self._me, run.run_id, view, ctx, token, ticket, span,
                           window, None if sessions is None else sessions.take_membership)
        if isinstance(tool, Err):
            answer(reply, planned.call, planned.call.name, tool)
            return
        if ticket is not None:
            self._gated.admit(GatedCall(run.run_id, tool, planned.call, ctx, reply, ticket))
            return
        self._dispatch(run.run_id, tool, planned.call, ctx=ctx, reply=reply)

    def _launch(self, call: GatedCall) -> None:
        """Start a call that passed its gate, as :meth:`start` starts any other."""
        self._dispatch(call.run_id, call.tool, call.call, ctx=call.ctx, reply=call.reply)

    def _dispatch(self, run_id: str, tool: Tool, call: ToolCall, *,
                  ctx: CallContext, reply: Callable[[CallReply], None]) -> None:
        """Start the call in its own actor, kept for its run (unless the run's work was
        stopped): stopping the run's work stops it, which cancels the call."""
        actor = self._dispatcher.start_call(tool, call, ctx, reply)
        calls = self._runs.get(run_id)
        if actor is not None and calls is not None:
            calls.actors[call.id] = actor
