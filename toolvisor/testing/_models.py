"""Scripted models for tests: no network, no key, every response decided by the test.

A script step may be a ``ModelError``: the model raises it, so a test can drive the
``on_model_error`` policy (a 429 with ``retry_after``, a timeout, a rejection) without a
provider. A scripted model reads each request's step from the request itself (the run's
conversation and the attempt), so each run follows its script from its own start. A model
built from ``async`` functions has ``arespond`` and runs on the runtime's event loop, as a real
async client would.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeAlias

from toolvisor.contract import (
    AssistantMessage,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolvisorError,
    UserMessage,
)

Step = ModelResponse | str | ModelError
"""A scripted response: a ``ModelResponse``, a ``str`` meaning "answer with this text", or a
``ModelError`` the model raises."""

ScriptStep = Step | Callable[[ModelRequest], Step] | Callable[[ModelRequest], Awaitable[Step]]
"""A ``ScriptedModel`` step: a fixed step, or a function (sync or ``async``) of the request."""


class ScriptExhaustedError(ToolvisorError, AssertionError):
    """A run asked the model for a step its script does not have (past its end, or for a
    prompt no script covers)."""


class ScriptNotFinishedError(ToolvisorError, AssertionError):
    """Steps of a script were never used: no run got to its last step."""


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


Scripts: TypeAlias = Iterable[ScriptStep] | Mapping[str, Iterable[ScriptStep]]
"""What a ``ScriptedModel`` is built from: one script for every run, or a script per prompt."""


class _Script:
    """One script's steps, where each turn's answer is, and the furthest step asked for."""

    def __init__(self, steps: list[ScriptStep]) -> None:
        self.steps = steps
        self.answers = [i for i, step in enumerate(steps) if not isinstance(step, ModelError)]
        self.furthest = -1

    def index(self, turn: int, attempt: int) -> int:
        """The step of a run's ``turn`` (1 for its first model call) at ``attempt``: the turn's
        scripted errors one per attempt, then its answer for every attempt after them."""
        answers = self.answers
        start = 0 if turn == 1 else answers[turn - 2] + 1 if turn - 2 < len(answers) \
            else len(self.steps)
        answer = answers[turn - 1] if turn - 1 < len(answers) else len(self.steps)
        return min(start + attempt - 1, answer)


class ScriptedModel:
    """A model that answers every run from a script: a fixed list of steps.

    A step is a ``ModelResponse``, a ``str`` (final text), a ``ModelError`` (raised: the
    policy sees it), or a function of the request returning one of those. Given a mapping
    from prompt to script, each run follows the script of its prompt (its last user message).

    Each run walks its script from its own start, and the model keeps no cursor: the step a
    request is at comes from the request alone. The turn is one more than the answers the
    run's conversation holds (the assistant messages after its prompt), and a turn's steps are
    the ``ModelError`` steps scripted for it, then its answer: ``request.attempt`` n takes the
    turn's n-th error, and every attempt after them its answer (a retry after a timeout gets
    the answer again). So runs on one model at once each get their own script, and a run
    resumed in another process, by a model built from the same script, goes on at the step
    its conversation reached. (A run that failed on its model and is resumed, ``retry_model``,
    asks from attempt 1 again: the same script gives it the step that failed.)

    A request past the end of its script raises :class:`ScriptExhaustedError` (the run fails
    loudly). :meth:`assert_finished` (also run on leaving a ``with`` block) raises
    :class:`ScriptNotFinishedError` if no run reached a script's last step: the steps after
    the furthest any run got were never used. Every request is kept in ``requests``. If any
    step is an ``async`` function the model has ``arespond`` (and runs on the runtime's event
    loop); otherwise it has ``respond``. Safe to call from any thread.
    """

    def __new__(cls, steps: Scripts) -> ScriptedModel:
        given: dict[str | None, list[ScriptStep]] = (
            {prompt: list(script) for prompt, script in steps.items()}
            if isinstance(steps, Mapping) else {None: list(steps)})
        chosen = _AsyncScriptedModel if cls is ScriptedModel and any(
            _is_async(step) for script in given.values() for step in script) else cls
        model = super().__new__(chosen)
        model._given = given
        return model

    _given: dict[str | None, list[ScriptStep]]

    def __init__(self, steps: Scripts) -> None:
        for prompt in self._given:
            if prompt is not None and not isinstance(prompt, str):
                raise TypeError(f"a ScriptedModel maps prompts (str) to scripts, got "
                                f"{type(prompt).__name__} {prompt!r}")
        for script in self._given.values():
            for step in script:
                if not callable(step):
                    _check_step(step)
        self._scripts = {prompt: _Script(script) for prompt, script in self._given.items()}
        self._lock = threading.Lock()  # the runs' model calls may come from many threads
        self.requests: list[ModelRequest] = []

    def _take(self, request: ModelRequest) -> ScriptStep:
        prompt, turn = _place(request)
        with self._lock:
            self.requests.append(request)
            script = self._scripts.get(None if None in self._scripts else prompt)
            if script is None:
                raise ScriptExhaustedError(
                    f"the model was asked about prompt {prompt!r}, which no script covers; "
                    f"the scripts are for {sorted(p for p in self._scripts if p is not None)}")
            index = script.index(turn, request.attempt)
            if index >= len(script.steps):
                raise ScriptExhaustedError(
                    f"the model was asked for turn {turn} (attempt {request.attempt}) of a "
                    f"run, which is step {index + 1}, but the script has only "
                    f"{len(script.steps)}; add steps to the ScriptedModel")
            script.furthest = max(script.furthest, index)
            return script.steps[index]

    def respond(self, request: ModelRequest) -> ModelResponse:
        step = self._take(request)
        return _as_response(step(request) if callable(step) else step)

    @property
    def remaining(self) -> int:
        """How many scripted steps come after the furthest any run got (every script)."""
        with self._lock:
            return sum(len(s.steps) - s.furthest - 1 for s in self._scripts.values())

    def assert_finished(self) -> None:
        """Fail if some script's last step was never asked for: no run got there."""
        with self._lock:
            unused = [(prompt, s) for prompt, s in self._scripts.items()
                      if s.furthest < len(s.steps) - 1]
        if unused:
            raise ScriptNotFinishedError("; ".join(
                f"{len(s.steps) - s.furthest - 1} of {len(s.steps)} scripted responses"
                f"{'' if prompt is None else f' for prompt {prompt!r}'} were never used (no "
                f"run got past step {s.furthest + 1})" for prompt, s in unused))

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.assert_finished()


def _place(request: ModelRequest) -> tuple[str | None, int]:
    """The run's prompt (its last user message) and its turn: one more than the answers its
    conversation holds after that prompt."""
    prompt, answers = None, 0
    for message in request.messages:
        if isinstance(message, UserMessage):
            prompt, answers = message.content, 0
        elif isinstance(message, AssistantMessage):
            answers += 1
    return prompt, answers + 1


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
    async model (``arespond``, on the runtime's event loop). Requests are kept in ``requests``,
    unless ``keep_requests=False``: a long soak or a benchmark keeps none (each request holds
    its run's whole transcript).
    """

    def __new__(cls, function: Callable[[ModelRequest], Any], *,
                keep_requests: bool = True) -> FunctionModel:
        chosen = _AsyncFunctionModel if cls is FunctionModel and _is_async(function) else cls
        return super().__new__(chosen)

    def __init__(self, function: Callable[[ModelRequest], Any], *,
                 keep_requests: bool = True) -> None:
        if not callable(function):
            raise TypeError(f"FunctionModel needs a function of the request, got {function!r}")
        self._function = function
        self._keep_requests = keep_requests
        self.requests: list[ModelRequest] = []

    def _seen(self, request: ModelRequest) -> None:
        if self._keep_requests:
            self.requests.append(request)

    def respond(self, request: ModelRequest) -> ModelResponse:
        self._seen(request)
        return _as_response(self._function(request))


class _AsyncFunctionModel(FunctionModel):
    """A ``FunctionModel`` of an ``async`` function: answers through ``arespond`` only."""

    respond = None  # type: ignore[assignment]  # an async function cannot answer respond

    async def arespond(self, request: ModelRequest) -> ModelResponse:
        self._seen(request)
        return _as_response(await self._function(request))
