"""``ctx.sessions``: the session's own view, and the child sessions a call starts.

Declared here as data and protocols only: the host implements them per call
(``toolvisor.host``) and the context link serves them to handlers in other processes. A child
session is a run hosted by the calling agent or by another ``Agent``, linked to the call that
started it: the call's end (its result, its timeout, its cancellation) or its run's
cancellation cancels the child, and the child's children.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolvisor.contract._messages import Message, ToolSpec, Usage
from toolvisor.contract._results import AskUser, Pending


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """Which model a run asks: its ``provider`` (``openai``, ``anthropic``, or the model's
    class name for a model of your own), its ``name``, and its ``variant`` (``None`` where the
    model says none, e.g. the API an OpenAI adapter speaks)."""

    provider: str
    name: str
    variant: str | None = None


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A read-only view of a run as it stands: its transcript so far, its shared state, the
    tokens it used, its status (``running``, ``suspended``, ``completed``, ...), its turns, and
    the run whose call started it (``None`` for a top-level run)."""

    run_id: str
    status: str
    messages: tuple[Message, ...]
    state: Mapping[str, Any]
    usage: Usage
    turns: int
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One tool of the flat catalog: its spec (what the model is told) and whether it is a
    member now (offered to the model, and allowed to run)."""

    spec: ToolSpec
    present: bool

    @property
    def name(self) -> str:
        return self.spec.name


@runtime_checkable
class SessionsAccess(Protocol):
    """``ctx.sessions``: what a handler may know of its own run and which children it may start.

    ``model``, ``snapshot_current``, ``tool_catalog`` and ``set_tool_membership`` are the
    run's own view; ``snapshot(run_id)`` reads a run the host grants (a child this call
    started). ``create_session`` / ``start_turn`` / ``close_session`` run child sessions, as
    linked children of this call; ``relay(outcome)`` asks a suspended child's question as
    this call's own (return it), so resuming the parent answers the child (a question), or
    resolving the key the parent shows resumes the child (one completion key).
    """

    def model(self) -> ModelInfo: ...

    def snapshot_current(self) -> SessionSnapshot: ...

    def snapshot(self, run_id: str) -> SessionSnapshot: ...

    def tool_catalog(self) -> tuple[CatalogEntry, ...]: ...

    def set_tool_membership(self, names: Iterable[str], present: bool) -> frozenset[str]: ...

    def create_session(self, agent: Any = None, *,
                       state: Mapping[str, Any] | None = None) -> str: ...

    def start_turn(self, prompt: str | Sequence[Message], *, session: str | None = None,
                   agent: Any = None, state: Mapping[str, Any] | None = None) -> Any: ...

    def relay(self, outcome: Any) -> AskUser | Pending: ...

    def close_session(self, session: str) -> None: ...
