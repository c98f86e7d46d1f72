"""Scripted models for tests: no network, no key, every response decided by the test.

A script step may be a ``ModelError``: the model raises it, so a test can drive the
``on_model_error`` policy (a 429 with ``retry_after``, a timeout, a rejection) without a
provider. A model built from ``async`` functions has ``arespond`` and runs on the runtime's
event loop, as a real async client would.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

from toolvisor.contract import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolvisorError,
)

Step = ModelResponse | str | ModelError
"""A scripted response: a ``ModelResponse``, a ``str`` meaning "answer with this text", or a
``ModelError`` the model raises."""

ScriptStep = Step | Callable[[ModelRequest], Step] | Callable[[ModelRequest], Awaitable[Step]]
"""A ``ScriptedModel`` step: a fixed step, or a function (sync or ``async``) of the request."""


class ScriptExhaustedError(ToolvisorError, AssertionError):
    """The run asked the model for more responses than the script has."""


class ScriptNotFinishedError(ToolvisorError, AssertionError):
    """The run ended with scripted responses left unused."""


def _as_response(step: object) -> ModelResponse:
    if isinstance(step, str):
        return ModelResponse(text=step)
    if isinstance(step, ModelResponse):
        return step
    if isinstance(step, ModelError):
        raise step
    raise TypeError(f"a script step is a ModelResponse, a str or a ModelError, "
                    f"got {type(step).__name__}")


def _is_async(function: object) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None))  # noqa: B004 (a callable object's method)


_call_ids = itertools.count(1)


def call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
    """A ``ToolCall`` for scripts: ``call("add", {"a": 1})``; ids are unique unless given."""
    return ToolCall(id=id or f"call_{next(_call_ids)}", name=name, arguments=arguments or {})


def calls(*tool_calls: ToolCall, text: str | None = None) -> ModelResponse:
    """A model turn that asks for these tool calls (in this order)."""
    return ModelResponse(text=text, tool_calls=tool_calls)


class ScriptedModel:
    """A model that answers with a fixed list of steps, in order.

    A step is a ``ModelResponse``, a ``str`` (final text), a ``ModelError`` (raised: the
    policy sees it), or a function of the request returning one of those. If any step is an
    ``async`` function the model has ``arespond`` (and runs on the runtime's event loop);
    otherwise it has ``respond``. Asking for more than the script holds raises
    :class:`ScriptExhaustedError` (the run fails loudly); :meth:`assert_finished` (also run on
    leaving a ``with`` block) raises :class:`ScriptNotFinishedError` if steps were left unused.
    Every request is kept in ``requests``. Safe to call from any thread.
    """

    def __new__(cls, steps: Iterable[ScriptStep]) -> ScriptedModel:
        steps = list(steps)
        chosen = _AsyncScriptedModel if cls is ScriptedModel and any(
            _is_async(step) for step in steps) else cls
        model = super().__new__(chosen)
        model._given = steps
        return model

    _given: list[ScriptStep]

    def __init__(self, steps: Iterable[ScriptStep]) -> None:
        for step in self._given:
            if not callable(step):
                _check_step(step)
        self._steps = self._given
        self._lock = threading.Lock()  # the run's model calls may come from more than one thread
        self._next = 0
        self.requests: list[ModelRequest] = []

    def _take(self, request: ModelRequest) -> ScriptStep:
        with self._lock:
            self.requests.append(request)
            if self._next >= len(self._steps):
                raise ScriptExhaustedError(
                    f"the model was asked for response {self._next + 1} but the script has only "
                    f"{len(self._steps)}; add steps to the ScriptedModel"
                )
            step = self._steps[self._next]
            self._next += 1
            return step

    def respond(self, request: ModelRequest) -> ModelResponse:
        step = self._take(request)
        return _as_response(step(request) if callable(step) else step)

    @property
    def remaining(self) -> int:
        """How many scripted responses are still unused."""
        return len(self._steps) - self._next

    def assert_finished(self) -> None:
        """Fail if any scripted response was never asked for."""
        if self.remaining:
            raise ScriptNotFinishedError(
                f"{self.remaining} of {len(self._steps)} scripted responses were never used"
            )

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.assert_finished()


class _AsyncScriptedModel(ScriptedModel):
    """A ``ScriptedModel`` with an ``async`` step: answers through ``arespond`` only."""

    respond = None  # type: ignore[assignment]  # async steps cannot be awaited from respond

    async def arespond(self, request: ModelRequest) -> ModelResponse:
        step = self._take(request)
        answer: object = step(request) if callable(step) else step
        if inspect.isawaitable(answer):
            answer = await answer
        return _as_response(answer)


def _check_step(step: object) -> None:
    if not isinstance(step, ModelResponse | str | ModelError):
        raise TypeError(f"a script step is a ModelResponse, a str, a ModelError or a function "
                        f"of the request, got {type(step).__name__}")


class FunctionModel:
    """A model whose every response is decided by ``function(request)``.

    The function returns a ``ModelResponse``, a ``str`` (final text) or raises (a
    ``ModelError`` reaches ``on_model_error`` as it is). An ``async def`` function makes an
    async model (``arespond``, on the runtime's event loop). Requests are kept in ``requests``.
    """

    def __new__(cls, function: Callable[[ModelRequest], Any]) -> FunctionModel:
        chosen = _AsyncFunctionModel if cls is FunctionModel and _is_async(function) else cls
        return super().__new__(chosen)

    def __init__(self, function: Callable[[ModelRequest], Any]) -> None:
        if not callable(function):
            raise TypeError(f"FunctionModel needs a function of the request, got {function!r}")
        self._function = function
        self.requests: list[ModelRequest] = []

    def respond(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return _as_response(self._function(request))


class _AsyncFunctionModel(FunctionModel):
    """A ``FunctionModel`` of an ``async`` function: answers through ``arespond`` only."""

    respond = None  # type: ignore[assignment]  # an async function cannot answer respond

    async def arespond(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return _as_response(await self._function(request))
