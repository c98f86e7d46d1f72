"""``ctx.direct_completions``: a one-shot model request from inside a tool call.

A handler that ranks, summarises or classifies asks the model once, through the agent's own
supervised model path (its timeout, ``on_model_error`` retries, tracing, usage and journal).
The contract declares the capability and what a context without one answers; the host
implements it, so the contract never imports the runtime.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from toolvisor.contract._errors import CapabilityError
from toolvisor.contract._messages import ModelRequest, ModelResponse


@runtime_checkable
class DirectCompletions(Protocol):
    """Asks a model once on behalf of the call (``ctx.direct_completions``).

    ``request`` is a ``ModelRequest`` (its ``model`` names one of the agent's ``models``;
    ``None`` is the run's model) or a ``str``, one user message. ``source`` names the
    completion within the call (a non-empty ``str``, used once per execution); by default
    the n-th unnamed completion of the execution is ``#n``. Together with the run and the
    call it is the completion's replay key: with a store, a completion that finished before a
    crash is read back from the journal when the call runs again. ``acomplete`` is the
    awaitable twin for ``async def`` handlers (it never blocks their event loop).
    """

    def complete(self, request: ModelRequest | str, source: str | None = None
                 ) -> ModelResponse: ...

    async def acomplete(self, request: ModelRequest | str, source: str | None = None
                        ) -> ModelResponse: ...


class _NoDirectCompletions:
    """The completions of a call outside an agent's run (``execute`` called directly, a tool
    served over MCP): there is no model to ask, and each use says so."""

    __slots__ = ()

    def complete(self, request: ModelRequest | str, source: str | None = None
                 ) -> ModelResponse:
        raise _unavailable()

    async def acomplete(self, request: ModelRequest | str, source: str | None = None
                        ) -> ModelResponse:
        raise _unavailable()

    def __repr__(self) -> str:
        return "NO_DIRECT_COMPLETIONS"


def _unavailable() -> CapabilityError:
    return CapabilityError(
        "direct_completions_unavailable",
        "this call has no model to ask: only a call of an agent's run can make a direct "
        "completion (a tool run by execute() or served over MCP has none); run the tool in an "
        "Agent, or ask a model yourself")


NO_DIRECT_COMPLETIONS: DirectCompletions = _NoDirectCompletions()
"""``ctx.direct_completions`` of a call that has no model to ask."""
