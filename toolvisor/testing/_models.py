"""Scripted models for tests: no network, no key, every response decided by the test."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from toolvisor.contract import ModelRequest, ModelResponse, ToolCall, ToolvisorError

Step = ModelResponse | str
"""A scripted response: a ``ModelResponse``, or a ``str`` meaning "answer with this text"."""


class ScriptExhaustedError(ToolvisorError, AssertionError):
    """The run asked the model for more responses than the script has."""


class ScriptNotFinishedError(ToolvisorError, AssertionError):
    """The run ended with scripted responses left unused."""


def _as_response(step: Step) -> ModelResponse:
    if isinstance(step, str):
        return ModelResponse(text=step)
    if isinstance(step, ModelResponse):
        return step
    raise TypeError(f"a script step is a ModelResponse or a str, got {type(step).__name__}")


_call_ids = itertools.count(1)


def call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
    """A ``ToolCall`` for scripts: ``call("add", {"a": 1})``; ids are unique unless given."""
    return ToolCall(id=id or f"call_{next(_call_ids)}", name=name, arguments=arguments or {})


def calls(*tool_calls: ToolCall, text: str | None = None) -> ModelResponse:
    """A model turn that asks for these tool calls (in this order)."""
    return ModelResponse(text=text, tool_calls=tool_calls)


class ScriptedModel:
    """A model that answers with a fixed list of steps, in order.

    Asking for more than the script holds raises :class:`ScriptExhaustedError` (the run fails
    loudly); :meth:`assert_finished` (also run on leaving a ``with`` block) raises
    :class:`ScriptNotFinishedError` if steps were left unused. Every request is kept in
    ``requests`` for assertions. Safe to call from any thread.
    """

    def __init__(self, steps: Iterable[Step]) -> None:
        self._steps = [_as_response(step) for step in steps]
        self._lock = threading.Lock()  # the run's model calls may come from more than one thread
        self._next = 0
        self.requests: list[ModelRequest] = []

    def respond(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            self.requests.append(request)
            if self._next >= len(self._steps):
                raise ScriptExhaustedError(
                    f"the model was asked for response {self._next + 1} but the script has only "
                    f"{len(self._steps)}; add steps to the ScriptedModel"
                )
            response = self._steps[self._next]
            self._next += 1
            return response

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


class FunctionModel:
    """A model whose every response is decided by ``function(request)``.

    The function returns a ``ModelResponse`` or a ``str`` (final text). Requests are kept in
    ``requests``.
    """

    def __init__(self, function: Callable[[ModelRequest], Step]) -> None:
        self._function = function
        self.requests: list[ModelRequest] = []

    def respond(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return _as_response(self._function(request))
