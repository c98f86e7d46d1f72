"""``CallContext``: what an arity-2 handler receives besides its arguments.

The durable capabilities are declared here as protocols only; ``toolvisor.durable`` implements
them and the host puts them into the context, so the contract never imports the store.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolvisor.contract._direct_completions import NO_DIRECT_COMPLETIONS, DirectCompletions
from toolvisor.contract._errors import CapabilityError
from toolvisor.contract._idempotency import idempotency_key
from toolvisor.contract._messages import ToolCall
from toolvisor.contract._progress import ProgressSink, check_progress
from toolvisor.contract._sessions import SessionsAccess

if TYPE_CHECKING:
    from toolvisor.contract._processes import ProcessAccess


@runtime_checkable
class CancelToken(Protocol):
    """Set by the runtime when the call should stop (timeout, cancelled run).

    ``threading.Event`` satisfies it; cooperative handlers poll ``is_set()`` or ``wait()``.
    """

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class _NeverCancelled:
    """The token of a call nobody can cancel (``execute`` called directly)."""

    __slots__ = ()

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        return False

    def __repr__(self) -> str:
        return "NEVER_CANCELLED"


NEVER_CANCELLED: CancelToken = _NeverCancelled()


@runtime_checkable
class StateAccess(Protocol):
    """A tool's view of the run's shared state: reads see a snapshot, writes are recorded."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


@runtime_checkable
class CompletionKeys(Protocol):
    """Issues the completion key of one call execution (``ctx.completion_key()``)."""

    def issue(self) -> str: ...

    @property
    def issued(self) -> str | None:
        """The key this execution took, or ``None``: a ``Pending`` without one is refused."""
        ...


@runtime_checkable
class DurableEffectsAccess(Protocol):
    """Effects of one call execution that survive a restart (``ctx.durable_effects()``)."""

    def run_json(self, step_id: str, input: Any, fn: Callable[[Any], Any]) -> Any: ...

    def external_event_key(self, name: str) -> str: ...

    def await_event_json(self, key: str, timeout: float | None = None) -> Any: ...

    def emit_process_event(self, type: str, payload: Any = None) -> int: ...


@runtime_checkable
class TraceSpans(Protocol):
    """Spans in the agent's trace for a handler that runs out of process (the host's
    tracing serves it; a worker's OpenTelemetry tracer forwards to it).

    ``start`` makes a span, a child of the span ``parent`` names (a handle ``start``
    returned) or of the call's own span (``None``), and returns its handle, trace id and span
    id; ``apply`` calls one of the span's methods (``set_attribute``, ``set_attributes``,
    ``add_event``, ``set_status``, ``update_name``, ``record_exception``); ``end`` ends it.
    """

    def start(self, name: str, parent: int | None, kind: str, attributes: dict[str, Any],
              start_time: int | None) -> tuple[int, int, int]: ...

    def apply(self, handle: int, method: str, args: tuple[Any, ...]) -> None: ...

    def end(self, handle: int, end_time: int | None) -> None: ...


def trace_headers(scope: Callable[[], AbstractContextManager[Any]] | None
                  ) -> dict[str, str] | None:
    """The W3C trace headers of the span ``scope`` makes current (a call's ``trace_scope``),
    or ``None`` when there is none: what carries a trace into a worker or a child run.

    ``opentelemetry`` is imported only when there is a scope (the host gives one to a traced
    call only).
    """
    if scope is None:
        return None
    from opentelemetry import propagate  # noqa: PLC0415 - only when tracing is on

    headers: dict[str, str] = {}
    with scope():
        propagate.inject(headers)
    return headers


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who is calling and with which capabilities; every field reads as ``None`` when missing
    (``cancelled`` and ``direct_completions`` read as a capability that says so).

    The context is built by the runtime per call and passed through to arity-2 handlers
    unchanged (the very same object).
    """

    session_id: str | None = None
    request_id: str | None = None
    tool_call: ToolCall | None = None
    context: Any = None
    engine: Any = None
    cancelled: CancelToken = NEVER_CANCELLED
    attempt: int = 1
    turn: int | None = None  # the run's turn whose model response asked for the call
    state: StateAccess | None = None
    sessions: SessionsAccess | None = None  # the run's own view, and child sessions
    completion_keys: CompletionKeys | None = None
    durable: DurableEffectsAccess | None = None
    trace_scope: Callable[[], AbstractContextManager[Any]] | None = None  # entered around a
    # thread or asyncio handler where it runs: the host's tracing makes the call's span current
    trace_spans: TraceSpans | None = None  # a worker's spans, made in the agent's trace
    process_admin: ProcessAccess | None = None  # read as ctx.processes
    progress: ProgressSink | None = None  # where report_progress and heartbeat go (the
    # runner's: it keeps the idle deadline, then tells the host's or the MCP server's sink)
    direct_completions: DirectCompletions = NO_DIRECT_COMPLETIONS  # one-shot model requests
    # (a context outside an agent's run refuses them, naming why)

    def completion_key(self) -> str:
        """The signed key naming this call's durable wait: take it, then return ``Pending``.

        Raises :class:`CapabilityError` ``completion_keys_unavailable`` when the run has no
        run store.
        """
        if self.completion_keys is None:
            raise CapabilityError(
                "completion_keys_unavailable",
                "this call has no completion keys: the run has no run store; give the "
                "agent a store, e.g. Agent(..., "
                "store='runs.sqlite')",
            )
        return self.completion_keys.issue()

    def durable_effects(self) -> DurableEffectsAccess:
        """Journaled steps and external events of this call (``run_json``, ...).

        Raises :class:`CapabilityError` ``durable_effects_unavailable`` when the run has no
        run store.
        """
        if self.durable is None:
            raise CapabilityError(
                "durable_effects_unavailable",
                "this call has no durable effects: the run has no run store; give the "
                "agent a store, e.g. Agent(..., "
                "store='runs.sqlite')",
            )
        return self.durable

    def report_progress(self, message: str, fraction: float | None = None) -> None:
        """Tell whoever watches the call how it is going: ``message`` (a ``str``) and, if
        known, ``fraction`` of the work done (0 to 1). It reaches the run's ``on_progress``,
        the live view, the call's span and an MCP client that asked for progress; the model
        never sees it. It also counts as a heartbeat. Outside a runner it goes nowhere.
        """
        checked = check_progress(message, fraction)
        if self.progress is not None:
            self.progress.report(message, checked)

    def heartbeat(self) -> None:
        """Say the handler is alive (it resets the tool's ``idle_timeout``), and nothing else."""
        if self.progress is not None:
            self.progress.heartbeat()

    @property
    def idempotency_key(self) -> str | None:
        """A key naming this call for an external API: the same for every attempt of the call
        and after its run resumes, different for every other call of every run. ``None`` for a
        call made outside a run (no run id or no model call id)."""
        if self.session_id is None or self.tool_call is None:
            return None
        return idempotency_key(self.session_id, self.turn, self.tool_call.id)

    @property
    def processes(self) -> ProcessAccess:
        """The run's background processes (a ``ProcessAccess``: ``start``, ``wait``,
        ``list``, ``cancel``).

        Raises :class:`CapabilityError` ``processes_unavailable`` when the call was not
        started by an agent's run (``execute`` called directly).
        """
        if self.process_admin is None:
            raise CapabilityError(
                "processes_unavailable",
                "this call has no process admin: only a call an agent's run started can "
                "start or wait for background processes",
            )
        return self.process_admin

    @property
    def tool_call_id(self) -> str | None:
        """The id of the call this context belongs to, if the call came from a model."""
        return self.tool_call.id if self.tool_call is not None else None
