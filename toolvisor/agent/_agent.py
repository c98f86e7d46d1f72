"""``Agent``: the facade that runs the agent loop on a supervision tree.

The agent checks its settings, builds the catalog, the machine's config and the durability
(store, signer), and starts an ``AgentTree`` (``toolvisor.host``: the supervisors, the
orchestrator, the runner they run on). Closing it stops the tree, then closes the run store
when the agent opened it from a path.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from toolvisor.agent._catalog import ToolsArgument, catalog
from toolvisor.agent._catalog import model as given_model
from toolvisor.agent._durable_runs import DurableRuns, RunOutcome
from toolvisor.agent._settings import Clocks, Limits, Timeouts, Tracing, settings
from toolvisor.call import OutputProjection
from toolvisor.contract import AsyncModel, Message, Model, RunProcesses, Tool
from toolvisor.durable import (
    Durability,
    RunStore,
    Signer,
    require_signed,
)
from toolvisor.executor import ToolRunner
from toolvisor.host import (
    AgentSessions,
    AgentTree,
    AnswerRun,
    CancelRun,
    LoopReply,
    OrchestratorSettings,
    Reply,
    ResumedSuspensions,
    SessionLimits,
    StartRun,
    ToolGates,
    agent_tool,
    reply_future,
    tracing_for,
)
from toolvisor.isolation import check_hosts, check_main_guard
from toolvisor.machine import (
    DEFAULT_MODEL_POLICY,
    MachineConfig,
    Mode,
    ModelPolicy,
    Policy,
    Suspended,
    TurnMachine,
    answers_for,
    policies_by_tool,
)
from toolvisor.registry import ToolRegistry, UnknownSourceError
from toolvisor.resilience import ResilienceState
from toolvisor.supervisors import SupervisorRef

_R = TypeVar("_R", bound=Reply)  # where a run's next outcome goes: a Future, or a LoopReply


class Agent(DurableRuns):
    """A supervised agent loop: a model, its tools, and the policy for their failures.

    ``run(prompt)`` blocks until the run ends and returns :data:`RunOutcome`; a ``Suspended``
    run (a tool asked the user, or returned ``Pending``) continues with ``resume``. Runs may be
    started from several threads at once. ``close()`` (or leaving a ``with`` block) stops the
    tree and leaves no thread or process behind (nor does any keep the interpreter alive). Each
    blocking method has an asyncio twin: ``arun``, ``aresume``, ``aresume_run``,
    ``acancel_run``, ``aresolve``, ``asubmit``, ``aclose``. With a ``store`` runs are durable:
    ``submit``, ``claim_runs``, ``resume_run``, ``cancel_run`` and ``resolve`` reach them in
    any process that opens it.
    """

    def __init__(
        self,
        model: Model | AsyncModel | str,
        tools: ToolsArgument = (),
        *,
        system_prompt: str | None = None,
        mode: Mode = "parallel_batch_approval",
        on_tool_error: Policy | Mapping[str, Policy] = "continue",
        on_model_error: ModelPolicy = DEFAULT_MODEL_POLICY,
        models: Mapping[str, Model | AsyncModel | str] | None = None,
        context: Any = None,
        name: str = "agent",
        store: RunStore | str | os.PathLike[str] | None = None,
        durability: Durability | None = None,
        limits: Limits | None = None,
        timeouts: Timeouts | None = None,
        tracing: Tracing | None = None,
        clocks: Clocks | None = None,
    ) -> None:
        """Check the settings and start the agent's supervision tree.

        Args:
            model: A model object (``respond`` or async ``arespond``), or a provider's model
                string (``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``,
                ``"openai-compatible:<model>@<base_url>"``: see
                :func:`toolvisor.models.from_string`). A model with ``async aclose()`` (every
                adapter) is closed with the agent, on the event loop its calls ran on.
            tools: The catalog: ``Tool`` objects and MCP servers (``McpToolProvider``, each a
                supervised child whose tools join as ``mcp:<name>``; past its intensity its
                tools leave), or a ``ToolRegistry`` for tools that come and go (only its
                members are offered), alone or in the sequence (the tools beside it join it as
                the source ``"agent"``).
            system_prompt: The system message every run starts with.
            mode: How one turn's tool calls run: ``"sequential"``, ``"parallel_batch_approval"``
                (all at once, answers to questions given together) or ``"parallel_streaming"``.
            on_tool_error: What a failed tool call leads to: ``"continue"`` (the model reads
                the error), ``"halt"``, a ``RetryPolicy`` or a function; or a mapping from tool
                name to policy, ``"*"`` for every other tool (default ``"continue"``).
            on_model_error: What a failed model call leads to (a ``ModelRetryPolicy``, or a
                function returning ``RetryAfter`` or ``FailRun``).
            models: More models (or strings) by name, which a tool's direct completion may ask
                (``ModelRequest.model``).
            context: Any object every tool call reads as ``ctx.context``.
            name: The agent's name: in its spans, its runs in the store, and its sessions.
            store: A SQLite path, a ``postgresql://`` URL or a ``RunStore``: makes runs
                durable. Short for ``durability=Durability(store=...)``.
            durability: How runs outlive the process (store, signing keys, lease ttl).
            limits: How much runs may do and hold (``Limits``; ``None``: the defaults).
            timeouts: The tools' and the model's deadlines (``Timeouts``).
            tracing: OpenTelemetry tracing and the progress callback (``Tracing``). Without it
                runs are traced if the application set a global tracer provider.
            clocks: The clocks and seed (``Clocks``), for deterministic tests.

        Raises:
            TypeError: A setting of the wrong type, naming it (a settings object that is not
                one, a ``tools`` item that is no tool, both ``store`` and ``durability``).
            ValueError: A setting out of range, naming it (``on_tool_error`` naming an unknown
                tool, a bad mode).
            RuntimeError: A ``process`` tool in the catalog while the program is not under
                ``if __name__ == "__main__":`` (every worker process would run it again).
        """
        model = given_model(model, "model")
        named_models = {name: given_model(given, f"models[{name!r}]")
                        for name, given in dict(models or {}).items()}
        limits = settings(limits, Limits, "limits")
        timeouts = settings(timeouts, Timeouts, "timeouts")
        tracing = settings(tracing, Tracing, "tracing")
        clocks = settings(clocks, Clocks, "clocks")
        durability = Durability.given(store, durability)
        found = catalog(tools)
        self._registry = registry = found.registry
        check_main_guard(registry.process_tools)
        check_hosts(t for n in registry.members() if isinstance(t := registry.resolve(n), Tool))
        default_policy, policies = policies_by_tool(on_tool_error, registry.members())
        self._gates = ToolGates(limits.per_tool, clock=clocks.monotonic)
        self._config = MachineConfig(
            tools=found.tools, system_prompt=system_prompt, on_tool_error=default_policy,
            tool_policies=policies, mode=mode, max_turns=limits.turns, seed=clocks.seed,
            on_model_error=on_model_error, catalog=self._catalog_member,
            catalog_names=registry.members, catalog_available=registry.offered_tool)
        self._store, self._owns_store = durability.opened()
        self._signer: Signer = durability.signer(self._store)
        self._resumed = ResumedSuspensions(
            self._config, clocks.wall if self._store is None else self._store.now)
        self._closed = False
        self.sessions = AgentSessions(  # what ctx.sessions starts children on
            name, model, config=self._config, store=self._store, closed=lambda: self._closed,
            orchestrator=self._orchestrator, resume=self._continue,
            limits=SessionLimits(limits.session_depth, limits.child_sessions))
        spans = tracing_for(model, tracing.provider, agent_name=name,
                            record_content=tracing.content)
        on_event = None if spans is None else spans.supervisor_event
        orchestrator_settings = functools.partial(
            OrchestratorSettings, signer=self._signer, registry=registry, context=context,
            projection=limits.tool_output or OutputProjection(), on_progress=tracing.on_progress,
            store=self._store, config=self._config, lease_ttl=durability.lease_ttl,
            gates=self._gates, tracing=spans, clock=self._resumed.clock,
            sessions=self.sessions, model_warn_after=timeouts.model_warn_after)
        try:
            self._tree = AgentTree(
                model, ToolRunner(tool_timeout=timeouts.tool,
                                  process_workers=limits.process_workers),
                model_timeout=timeouts.model, max_concurrent_calls=limits.concurrent_calls,
                settings=orchestrator_settings, on_event=on_event, named_models=named_models,
                children=[server.child_spec(functools.partial(self._orphan, server.source),
                                            on_event) for server in found.servers])
        except BaseException:
            self._close_store()
            raise

    def _orphan(self, source: str) -> None:
        """A supervised source gave up: its tools leave the catalog, kept as orphans."""
        with contextlib.suppress(UnknownSourceError):
            self._registry.orphan_source(source)

    def _catalog_member(self, name: str) -> Tool | None:
        """The machine's view of the catalog: members only, whichever source provides them."""
        found = self._registry.resolve(name)
        return found if isinstance(found, Tool) else None

    def as_tool(self, *, name: str, description: str, call_timeout: float | None = None) -> Tool:
        """This agent as a tool (``{"prompt": str}`` in, the answer's text out): each call runs
        it as a child session of the calling run, whose questions are asked through that run.

        Args:
            name: The tool's name.
            description: What the model is told the tool does.
            call_timeout: The deadline of each call, in seconds (``None``: the calling agent's
                ``Timeouts.tool``).

        Returns:
            The tool, for another agent's ``tools``.
        """
        return agent_tool(self, name=name, description=description, timeout=call_timeout)

    def processes(self, run_id: str) -> RunProcesses:
        """The background processes the calls of run ``run_id`` started, to ``wait`` for,
        ``list`` and ``cancel``.

        Args:
            run_id: The run's id (``outcome.run_id``).

        Returns:
            The run's processes: with a store, any agent on it sees them; without, this one.

        Raises:
            UnknownRunError: The store has no run ``run_id``.
        """
        return self._tree.processes_of(run_id)

    @property
    def registry(self) -> ToolRegistry:
        """The catalog: which tools the model sees and which may run (members only)."""
        return self._registry

    def resilience_state(self) -> ResilienceState:
        """Every tool's breaker, bulkhead and rate limit as they stand (JSON-able)."""
        return self._gates.state()

    @property
    def supervisor(self) -> SupervisorRef:
        """The root of the agent's supervision tree (``which_children``, ``count_children``)."""
        return self._tree.root

    @property
    def store(self) -> RunStore | None:
        """The run store that makes runs durable, or ``None``."""
        return self._store

    @property
    def runner(self) -> ToolRunner:
        """The tool runner (its ``stats``: timeouts, abandoned threads, replaced workers)."""
        return self._tree.runner

    # --- runs -------------------------------------------------------------------------------

    def run(self, prompt: str | Sequence[Message], *, state: Mapping[str, Any] | None = None,
            wait_for: float | None = None) -> RunOutcome:
        """Run the loop on ``prompt`` until it completes, suspends, halts or fails.

        Every outcome carries the run's ``run_id``, its ``status`` and ``usage``; its ``text``
        is the final answer of a ``Completed`` run, and on any other outcome raises
        :class:`~toolvisor.RunNotCompletedError`, which says why and carries the outcome.

        Args:
            prompt: The user's message, or the messages to start from.
            state: The shared state tools read and write through ``ctx.state``.
            wait_for: Seconds this call waits (``None``: until the run ends). A run without a
                store is cancelled then; a durable run goes on (``resume_run`` waits for it
                again, ``cancel_run`` ends it).

        Returns:
            The run's outcome.

        Raises:
            TimeoutError: The run did not end within ``wait_for`` seconds.
            RuntimeError: The agent is closed.
        """
        return self._wait(*self._start(prompt, state, reply_future()), wait_for)

    def resume(self, suspended: Suspended, answer: Any, *,
               wait_for: float | None = None) -> RunOutcome:
        """Continue a suspended run (under its ``run_id``) with the answer of its waiting call.

        With a store it resumes from the latest checkpoint; calls waiting on keys take
        :meth:`resolve`. An answer to a question with options must be one of them (or an
        ``Err``); past its deadline the question's default answers it.

        Args:
            suspended: The outcome the run suspended with, signed with this agent's keys.
            answer: The waiting call's result: a plain value becomes ``Ok(value)``, an
                ``Ok``/``Err`` stays as it is. When the run waits on several calls, a mapping
                from call id to answer (``suspended.call_ids``; ``parallel_streaming`` may
                answer some of them): a mapping is always answers by call id, so wrap a
                mapping answer in ``Ok``.
            wait_for: Seconds this call waits, as for :meth:`run`.

        Returns:
            The run's next outcome.

        Raises:
            ValueError: An unknown call id or a missing answer (the expected ids are listed;
                nothing changes), or an answer that is not one of the question's options.
            SignatureError: ``suspended`` is not signed with this agent's keys.
            AlreadyResumedError: ``suspended`` was resumed before.
            TimeoutError: The run did not go on to its next outcome within ``wait_for``.
        """
        return self._wait(*self._continue(suspended, answer), wait_for)

    async def arun(self, prompt: str | Sequence[Message], *,
                   state: Mapping[str, Any] | None = None) -> RunOutcome:
        """:meth:`run` for asyncio: awaiting does not block the event loop; cancelling the
        awaiting task (``asyncio.timeout`` too) cancels the run.

        Args:
            prompt: The user's message, or the messages to start from.
            state: The shared state tools read and write through ``ctx.state``.

        Returns:
            The run's outcome, straight to this loop (``LoopReply``).
        """
        return await self._await(*self._start(prompt, state, LoopReply(asyncio.get_running_loop())))

    async def aresume(self, suspended: Suspended, answer: Any) -> RunOutcome:
        """:meth:`resume` for asyncio; cancelling the awaiting task cancels the run.

        Args:
            suspended: The outcome the run suspended with.
            answer: The waiting call's result, or the results by call id.

        Returns:
            The run's next outcome.
        """
        return await self._await(*self._continue(suspended, answer))

    def _start(self, prompt: str | Sequence[Message], state: Mapping[str, Any] | None,
               reply: _R) -> tuple[str, _R]:
        check_main_guard(self._registry.process_tools)
        machine = TurnMachine(self._config)
        return self._submit(reply, machine, machine.start(prompt, state=state))

    def _continue(self, suspended: Suspended, answer: Any) -> tuple[str, Future[Any]]:
        """Check ``suspended`` and the answers; a relayed question's answer goes to its child."""
        if not isinstance(suspended, Suspended):
            raise TypeError(f"resume() takes the Suspended a run returned, got "
                            f"{type(suspended).__name__}")
        check_main_guard(self._registry.process_tools)
        require_signed(self._signer, suspended.signed_text(), suspended.signature)
        answers = answers_for(suspended, answer, self._config.mode)
        return suspended.run_id, self.sessions.relays.answer(  # relayed ones: children
            suspended, dict(answers), functools.partial(self._answered, suspended))

    def _answered(self, suspended: Suspended, answers: dict[str, Any]) -> Future[Any]:
        """The run keeps its id: resumed from the store, or without one from ``suspended``."""
        if self._store is None or self._store.get_run(run_id := suspended.run_id) is None:
            return self._submit(reply_future(), *self._resumed.resume(suspended, answers))[1]
        future = reply_future()
        self._orchestrator().tell(AnswerRun(run_id, answers, future, suspended))
        return future

    def _submit(self, reply: _R, machine: TurnMachine, effects: list[Any],
                run_id: str | None = None) -> tuple[str, _R]:
        """Host ``machine`` as run ``run_id`` (new unless it goes on), its outcome to ``reply``."""
        if self._closed:
            raise RuntimeError("this Agent is closed; create a new one")
        run_id = run_id or uuid.uuid4().hex
        self._orchestrator().tell(StartRun(run_id, machine, effects, reply))
        return run_id, reply

    async def _await(self, run_id: str, reply: Future[Any] | LoopReply) -> RunOutcome:
        try:
            outcome: RunOutcome = await (
                reply if isinstance(reply, LoopReply) else asyncio.wrap_future(reply))
        except asyncio.CancelledError:
            self._orchestrator().tell(CancelRun(run_id))
            raise
        return outcome

    def _orchestrator(self) -> Any:
        return self._tree.orchestrator()

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the supervision tree, then the runner and the actors' threads, then close the
        store if the agent opened it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._tree.close()
        finally:
            self._close_store()

    def _close_store(self) -> None:
        if self._owns_store and self._store is not None:
            self._store.close()

    def __enter__(self) -> Agent:
        return self

    async def __aenter__(self) -> Agent:
        return self

    async def aclose(self) -> None:
        """:meth:`close` for asyncio, on a worker thread: the loop goes on while the tree
        stops."""
        await asyncio.to_thread(self.close)

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
