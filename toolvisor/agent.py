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
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from toolvisor.call import OutputProjection
from toolvisor.contract import AsyncModel, Message, Model, Tool, check_seconds
from toolvisor.durable import (
    QUEUED,
    UNSET,
    Durability,
    DurableError,
    ResolveOutcome,
    RunStore,
    Signer,
    require_signed,
)
from toolvisor.executor import ToolRunner
from toolvisor.host import (
    AgentSessions,
    AgentTree,
    AnswerRun,
    AttachRun,
    CancelRun,
    ClaimRuns,
    LoopReply,
    OrchestratorSettings,
    ProgressCallback,
    Reply,
    ResilienceConfig,
    ResumedSuspensions,
    SessionLimits,
    StartRun,
    ToolGates,
    agent_tool,
    refuse_child,
    reply_future,
    tracing_for,
)
from toolvisor.isolation import check_hosts, check_main_guard
from toolvisor.machine import (
    DEFAULT_MODEL_POLICY,
    Completed,
    Failed,
    Halted,
    MachineConfig,
    Mode,
    ModelPolicy,
    Policy,
    Suspended,
    TurnMachine,
    answers_for,
)
from toolvisor.mcp import McpToolProvider
from toolvisor.models import from_string
from toolvisor.registry import StaticToolProvider, ToolRegistry, UnknownSourceError
from toolvisor.resilience import ResilienceState
from toolvisor.supervisors import SupervisorRef

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

RunOutcome: TypeAlias = Completed | Suspended | Halted | Failed
"""What a run ends with: done, waiting for answers, halted on purpose, or failed."""
_R = TypeVar("_R", bound=Reply)  # where a run's next outcome goes: a Future, or a LoopReply


class Agent:
    """A supervised agent loop: a model, its tools, and the policy for their failures.

    ``run(prompt)`` blocks until the run ends and returns :data:`RunOutcome`; a ``Suspended``
    run (a tool asked the user, or returned ``Pending``) continues with ``resume``. Runs may be
    started from several threads at once. Invalid configuration is refused here (``ValueError``
    or ``TypeError`` naming the setting). ``close()`` (or leaving a ``with`` block) stops the
    tree and leaves no thread or process behind (nor does any keep the interpreter alive). Each
    blocking method has an asyncio twin: ``arun``, ``aresume``, ``aresume_run``,
    ``acancel_run``, ``aresolve``, ``asubmit``, ``aclose``. With a ``process`` tool in the
    catalog, building or running the agent outside ``if __name__ == "__main__":`` raises
    ``RuntimeError`` (every worker process would run the program again).

    ``registry`` (a :class:`~toolvisor.registry.ToolRegistry`) is the catalog, for tools that
    come and go (``tools`` join it as the source ``"agent"``); only its members are offered.

    ``mcp`` (:class:`~toolvisor.mcp.McpToolProvider` objects): MCP servers whose tools join the
    catalog (``mcp:<name>``), each a supervised child (past its intensity, its tools leave).

    ``model`` is a model object, or a provider's model string (``"openai:gpt-4.1-mini"``,
    ``"anthropic:claude-sonnet-4-5"``, ``"openai-compatible:<model>@<base_url>"``: see
    :func:`toolvisor.models.from_string`). A model with ``async aclose()`` (every adapter) is
    closed with the agent, on the event loop its calls ran on. ``models`` names more models
    (or strings) a direct completion may ask (``ModelRequest.model``).

    ``store`` (a SQLite path, a ``postgresql://`` URL, or a ``RunStore``) makes runs
    durable (``resume_run``, ``resolve``, ``submit``). ``resilience`` guards tools: a
    ``Resilience`` (breaker, bulkhead, rate limit) for all, or by tool name, its state shared by
    all runs (:meth:`resilience_state`). ``clock`` dates expiring questions' deadlines.

    Runs are traced with OpenTelemetry when ``tracer_provider`` is given or a global one is set
    (spans ``invoke_agent {name}``, ``chat {model}``, ``execute_tool {tool}``; tool arguments
    and results too with ``trace_content=True``); supervisor restarts are events on them.
    """

    def __init__(
        self,
        model: Model | AsyncModel | str,
        tools: Sequence[Tool] = (),
        *,
        # the loop
        system_prompt: str | None = None,
        mode: Mode = "parallel_batch_approval",
        max_turns: int = 8,
        on_tool_error: Policy = "continue",
        tool_policies: Mapping[str, Policy] | None = None,
        on_model_error: ModelPolicy = DEFAULT_MODEL_POLICY,
        tool_timeout: float = 30.0,
        model_timeout: float = 120.0,
        model_warn_after: float | None = 30.0,
        models: Mapping[str, Model | AsyncModel | str] | None = None,
        output_projection: OutputProjection | None = None,
        context: Any = None,
        on_progress: ProgressCallback | None = None,
        # the catalog and its guards
        registry: ToolRegistry | None = None,
        mcp: Sequence[McpToolProvider] = (),
        resilience: ResilienceConfig = None,
        # sizing
        process_workers: int = 2,
        max_concurrent_calls: int = 1024,
        max_session_depth: int = 3,
        max_child_sessions: int = 16,
        # durability
        store: RunStore | str | os.PathLike[str] | None = None,
        durability: Durability | None = None,
        # tracing
        name: str = "agent",
        tracer_provider: TracerProvider | None = None,
        trace_content: bool = False,
        # determinism (tests)
        seed: int = 0,
        clock: Callable[[], float] = time.time,
        resilience_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        model = _model(model, "model")
        check_seconds("model_timeout", model_timeout, positive=True)
        check_seconds("model_warn_after", model_warn_after, positive=True, optional=True)
        named_models = {name: _model(given, f"models[{name!r}]")
                        for name, given in dict(models or {}).items()}
        durability = Durability.given(store, durability)
        self._registry = registry = _catalog(tools, registry, mcp)
        check_main_guard(registry.process_tools)
        check_hosts(t for n in registry.members() if isinstance(t := registry.resolve(n), Tool))
        self._gates = ToolGates(resilience, clock=resilience_clock)
        self._config = MachineConfig(
            tools=tuple(tools), system_prompt=system_prompt, on_tool_error=on_tool_error,
            tool_policies=dict(tool_policies or {}), mode=mode, max_turns=max_turns, seed=seed,
            on_model_error=on_model_error, catalog=self._catalog_member,
            catalog_names=registry.members, catalog_available=registry.offered_tool)
        self._store, self._owns_store = durability.opened()
        self._signer: Signer = durability.signer(self._store)
        self._resumed = ResumedSuspensions(
            self._config, clock if self._store is None else self._store.now)
        self._closed = False
        self.session_host = AgentSessions(  # what ctx.sessions starts children on
            name, model, config=self._config, store=self._store, closed=lambda: self._closed,
            orchestrator=self._orchestrator, resume=self._continue,
            limits=SessionLimits(max_session_depth, max_child_sessions))
        tracing = tracing_for(model, tracer_provider, agent_name=name, record_content=trace_content)
        on_event = None if tracing is None else tracing.supervisor_event
        settings = functools.partial(
            OrchestratorSettings, signer=self._signer, registry=registry, context=context,
            projection=output_projection or OutputProjection(), on_progress=on_progress,
            store=self._store, config=self._config, lease_ttl=durability.lease_ttl,
            gates=self._gates, tracing=tracing, clock=self._resumed.clock,
            sessions=self.session_host, model_warn_after=model_warn_after)
        try:
            self._tree = AgentTree(
                model, ToolRunner(tool_timeout=tool_timeout, process_workers=process_workers),
                model_timeout=model_timeout, max_concurrent_calls=max_concurrent_calls,
                settings=settings, on_event=on_event, named_models=named_models,
                children=[server.child_spec(functools.partial(self._orphan, server.source),
                                            on_event) for server in mcp])
        except BaseException:
            self._close_store()
            raise
        self.processes = self._tree.processes_of  # agent.processes(run_id): see AgentTree

    def _orphan(self, source: str) -> None:
        """A supervised source gave up: its tools leave the catalog, kept as orphans."""
        with contextlib.suppress(UnknownSourceError):
            self._registry.orphan_source(source)

    def _catalog_member(self, name: str) -> Tool | None:
        """The machine's view of the catalog: members only, whichever source provides them."""
        found = self._registry.resolve(name)
        return found if isinstance(found, Tool) else None

    def as_tool(self, *, name: str, description: str, timeout: float | None = None) -> Tool:
        """A tool running this agent as a child session of the calling run (``{"prompt"}``)."""
        return agent_tool(self, name=name, description=description, timeout=timeout)

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
            timeout: float | None = None) -> RunOutcome:
        """Run the loop on ``prompt`` until it completes, suspends, halts or fails.

        Every outcome carries the run's ``run_id``, its ``status`` and ``usage``; its ``text``
        is the final answer of a ``Completed`` run, and on any other outcome raises
        :class:`~toolvisor.RunNotCompletedError`, which says why (the model's error, the halt's
        reason, what the run waits for) and carries the outcome.

        ``state`` is the shared state tools read and write through ``ctx.state``. Past
        ``timeout`` seconds ``TimeoutError`` is raised; a run without a store is cancelled then,
        a durable run goes on (``resume_run`` waits for it again, ``cancel_run`` ends it).
        """
        return self._wait(*self._start(prompt, state, reply_future()), timeout)

    def resume(self, suspended: Suspended, answer: Any, *,
               timeout: float | None = None) -> RunOutcome:
        """Continue a suspended run (under its ``run_id``); ``answer`` becomes the waiting
        call's tool result.

        When the run waits on several calls, ``answer`` is a mapping from call id to answer
        (``suspended.call_ids`` lists them), one per waiting call (``parallel_streaming`` may
        answer some of them); an unknown id or a missing answer is a ``ValueError`` that lists
        the expected ids, and nothing changes (a mapping is always answers by call id: wrap a
        mapping answer in ``Ok``). A plain value becomes ``Ok(value)``; ``Ok``/``Err`` stay as
        they are. An answer to a question with options must be one of them (or an ``Err``);
        past its deadline the question's default answers it. ``suspended`` must be signed with
        this agent's keys (``SignatureError``) and resumes once (``AlreadyResumedError``). With
        a store it resumes from the latest checkpoint; calls waiting on keys take :meth:`resolve`.
        """
        return self._wait(*self._continue(suspended, answer), timeout)

    async def arun(self, prompt: str | Sequence[Message], *,
                   state: Mapping[str, Any] | None = None) -> RunOutcome:
        """``run`` for asyncio: awaiting does not block the event loop; cancelling the
        awaiting task cancels the run. Its outcome comes straight to this loop (``LoopReply``)."""
        return await self._await(*self._start(prompt, state, LoopReply(asyncio.get_running_loop())))

    async def aresume(self, suspended: Suspended, answer: Any) -> RunOutcome:
        """``resume`` for asyncio."""
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
        return suspended.run_id, self.session_host.relays.answer(  # relayed ones: children
            suspended, dict(answers), functools.partial(self._answered, suspended))

    def _answered(self, suspended: Suspended, answers: dict[str, Any]) -> Future[Any]:
        """The run keeps its id: resumed from the store, or without one from ``suspended``."""
        if self._store is None or self._store.get_run(run_id := suspended.run_id) is None:
            return self._submit(reply_future(), *self._resumed.resume(suspended, answers))[1]
        future = reply_future()
        self._orchestrator().tell(AnswerRun(run_id, answers, future, suspended))
        return future

    # --- durable runs -----------------------------------------------------------------------

    def submit(self, prompt: str | Sequence[Message], *,
               state: Mapping[str, Any] | None = None) -> str:
        """Queue a run on ``prompt`` in the store (its first checkpoint) for a worker on any
        machine (``toolvisor worker``); its ``run_id``, which ``resume_run`` takes."""
        store = self._require_store("submit")
        machine = TurnMachine(self._config)
        machine.start(prompt, state=state)
        run_id = store.create_run(status=QUEUED, agent=self.session_host.agent_name).run_id
        store.save_checkpoint(run_id, machine.last_effect_id, machine.checkpoint().to_json(),
                              status=QUEUED)
        return run_id

    async def asubmit(self, prompt: str | Sequence[Message], *,
                      state: Mapping[str, Any] | None = None) -> str:
        """``submit`` for asyncio (on a worker thread)."""
        return await asyncio.to_thread(self.submit, prompt, state=state)

    def claim_runs(self, limit: int) -> dict[str, Future[RunOutcome]]:
        """Claim up to ``limit`` runnable runs of the store and drive them here (a ``Worker``
        does): each one's next outcome, by run id; one that comes to wait on keys is let go."""
        self._require_store("claim_runs")
        self._orchestrator().tell(ClaimRuns(limit, future := reply_future()))
        return cast("dict[str, Future[RunOutcome]]", future.result())

    def resume_run(self, run_id: str, *, timeout: float | None = None) -> RunOutcome:
        """The next outcome of run ``run_id``, picking it up from the store if needed.

        A run hosted by this agent (waiting on completion keys) is waited for. Any other run is
        restored from the store's latest checkpoint, in this process, and goes on from there:
        the outstanding effect is performed again (a tool call that had completed is not run
        again; a durable step that had completed is replayed from the journal), resolved keys
        are delivered (a wait whose deadline passed meanwhile is expired first, through its
        ``on_timeout``; a question past its deadline is answered by its default), and a run
        still waiting reports ``Suspended`` with its keys; one that failed on its model is
        asked again. ``timeout`` only stops this wait (``TimeoutError``), never the run. A
        child session's id is a ``ValueError`` naming its parent, but on the child's own agent.
        """
        return self._wait(run_id, self._attach("resume_run", run_id), timeout, cancel=False)

    async def aresume_run(self, run_id: str) -> RunOutcome:
        """``resume_run`` for asyncio; cancelling the awaiting task (``asyncio.timeout`` too) only
        stops this wait, as ``timeout`` does: the run goes on (``acancel_run`` ends it)."""
        outcome: RunOutcome = await asyncio.wrap_future(self._attach("aresume_run", run_id))
        return outcome

    def _attach(self, operation: str, run_id: str) -> Future[Any]:
        refuse_child(operation, self._require_store(operation), run_id, self.session_host)
        check_main_guard(self._registry.process_tools)
        self._orchestrator().tell(AttachRun(run_id, future := reply_future()))
        return future

    def cancel_run(self, run_id: str, *, timeout: float | None = None) -> RunOutcome:
        """Cancel run ``run_id`` and return how it ended (``Halted("cancelled")``, or its
        outcome if it had already ended).

        Its waits resolve as cancelled; a ``Pending`` call that asked for
        ``on_cancel="cancel_external_work"`` gets its tool's ``on_cancel`` hook called.
        ``timeout`` only stops this wait (``TimeoutError``): the run is cancelled all the same.
        """
        outcome: RunOutcome = self._cancel("cancel_run", run_id).result(timeout)
        return outcome

    async def acancel_run(self, run_id: str) -> RunOutcome:
        """``cancel_run`` for asyncio; cancelling the awaiting task only stops this wait."""
        outcome: RunOutcome = await asyncio.wrap_future(self._cancel("acancel_run", run_id))
        return outcome

    def _cancel(self, operation: str, run_id: str) -> Future[Any]:
        self._require_store(operation)
        self._orchestrator().tell(CancelRun(run_id, future := reply_future()))
        return future

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        """Deliver the result of a ``Pending`` call: ``ok=<JSON>`` or ``error=<JSON>``.

        Returns ``"accepted"`` (first resolution: the run continues), ``"already_resolved"``
        or ``"unknown_or_revoked"`` (tampered, foreign or revoked key: nothing changes). Any
        process that can open the store may do the same (``toolvisor resolve``).
        """
        return self._require_store("resolve").resolve(key, ok=ok, error=error)

    async def aresolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        """``resolve`` for asyncio (on a worker thread). Cancelling the awaiting task does not
        undo a resolution under way: resolving again answers ``"already_resolved"`` if made."""
        return await asyncio.to_thread(self._require_store("aresolve").resolve, key, ok=ok,
                                       error=error)

    def _require_store(self, operation: str) -> RunStore:
        if self._store is None:
            raise DurableError.needs_store(operation)
        return self._store

    def _submit(self, reply: _R, machine: TurnMachine, effects: list[Any],
                run_id: str | None = None) -> tuple[str, _R]:
        """Host ``machine`` as run ``run_id`` (new unless it goes on), its outcome to ``reply``."""
        if self._closed:
            raise RuntimeError("this Agent is closed; create a new one")
        run_id = run_id or uuid.uuid4().hex
        self._orchestrator().tell(StartRun(run_id, machine, effects, reply))
        return run_id, reply

    def _wait(self, run_id: str, future: Future[Any], timeout: float | None, *,
              cancel: bool = True) -> RunOutcome:
        """The run's next outcome. Past ``timeout`` a run without a store is cancelled; a
        durable run never is (``cancel_run`` does that): the wait stops, the run goes on."""
        try:
            outcome: RunOutcome = future.result(timeout)
        except TimeoutError:
            if cancel and self._store is None:
                self._orchestrator().tell(CancelRun(run_id))
                raise TimeoutError(f"run {run_id} did not end within {timeout} s; it was "
                                   "cancelled") from None
            raise TimeoutError(f"run {run_id} did not end within {timeout} s; it goes on "
                               f"(agent.resume_run({run_id!r}) waits again, "
                               "agent.cancel_run cancels it)") from None
        return outcome

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
        """Stop the supervision tree, then the runner and the actors' threads. Idempotent."""
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
        """``close`` for asyncio, on a worker thread: the loop goes on while the tree stops."""
        await asyncio.to_thread(self.close)

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _catalog(tools: Sequence[Tool], registry: ToolRegistry | None,
             mcp: Sequence[McpToolProvider]) -> ToolRegistry:
    """The agent's catalog: ``registry`` (``tools`` added as the source ``"agent"``), else
    one of ``tools``; each MCP server joins it as a source."""
    if registry is not None and not isinstance(registry, ToolRegistry):
        raise TypeError(f"registry must be a ToolRegistry or None, got "
                        f"{type(registry).__name__}")
    if registry is None:
        registry = ToolRegistry.from_tools(tools)
    elif tools:
        registry.add_source("agent", StaticToolProvider(tools))
    for server in mcp:
        if not isinstance(server, McpToolProvider):
            raise TypeError(f"mcp takes McpToolProvider objects, got {type(server).__name__}")
        registry.add_source(server.source, server)
    return registry


def _model(model: Model | AsyncModel | str, setting: str) -> Model | AsyncModel:
    """A model object, or the provider's model a string names; anything else refused."""
    found = from_string(model) if isinstance(model, str) else model
    if not isinstance(found, Model | AsyncModel):
        raise TypeError(f"{setting} must have respond(request) -> ModelResponse or async "
                        f"arespond(request) -> ModelResponse, got {found!r}")
    return found
