"""``ModelCalls``: performs ``LlmCall`` effects off the orchestrator's thread.

A model call runs through the agent's ``ToolRunner`` like a tool call, so it gets the same
guarantees: an ``arespond`` coroutine is a task on the runner's one event loop (no thread per
call), a sync ``respond`` runs on the runner's bounded thread pool; each attempt has a deadline
(the task is cancelled, a sync call's thread abandoned and counted); the answer is delivered
exactly once, and a late one is discarded and logged. Whatever goes wrong becomes a
``ModelError`` with a reason from its closed set. What the model reports while it answers (a
streamed text delta) goes to the call's progress sink.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import (
    AsyncModel,
    Err,
    HandlerResult,
    Model,
    ModelError,
    ModelProgressSink,
    ModelRequest,
    ModelResponse,
    Ok,
    Tool,
    ToolError,
    reporting_model_progress,
)
from toolvisor.executor import CallHandle, ToolRunner
from toolvisor.host._protocol import ModelAnswer
from toolvisor.host.observe import Scope
from toolvisor.machine import ModelReplied, NotPerformed

_log = get_event_log("model_calls")

_TOOL_NAME = "model"  # how the runner's events and stats name a model call
_CLOSE_TIMEOUT = 5.0  # seconds a model's aclose() may take when its agent closes


def _checked(response: Any) -> Ok:
    if not isinstance(response, ModelResponse):
        raise ModelError("invalid_response", f"the model returned a {type(response).__name__}, "
                         "not a ModelResponse", cause=repr(response)[:200])
    return Ok(response)


def _answered(answer: ModelAnswer) -> None:
    """An ``_Ask``'s ``on_answer`` once it has answered: called once, then let go."""


class _Ask(dict[str, Any]):
    """One model call's arguments (``request``, ``progress``, ``scope``: what the handler
    reads) that is also the runner's ``on_done`` for it, turning the result into the answer.

    One object per call in flight instead of a dict, a closure and its cells (each an object
    the collector tracks while the model thinks). It lets go of ``on_answer`` once it has
    answered: the caller's callback usually leads back to the call's handle, which leads here.
    """

    __slots__ = ("on_answer", "timeout")

    def __init__(self, request: ModelRequest, progress: ModelProgressSink | None,
                 scope: Scope | None,
                 on_answer: Callable[[ModelAnswer], None], timeout: float) -> None:
        super().__init__(request=request, progress=progress, scope=scope)
        self.on_answer = on_answer
        self.timeout = timeout

    def __call__(self, result: HandlerResult) -> None:
        on_answer, self.on_answer = self.on_answer, _answered
        on_answer(answer_of(result, self.timeout))


def model_tool(model: Model | AsyncModel, timeout: float) -> Tool:
    """``model`` as a runner-executable ``Tool``: its arguments are the request, the sink
    its progress reports go to and the scope it runs in (None: none)."""
    if isinstance(model, AsyncModel):
        async def ask_async(arguments: dict[str, Any]) -> Ok:
            scope = arguments["scope"]
            with reporting_model_progress(arguments["progress"]):
                if scope is None:  # no span to make current: no second block per call
                    return _checked(await model.arespond(arguments["request"]))
                with scope():
                    return _checked(await model.arespond(arguments["request"]))
        return Tool(_TOOL_NAME, handler=ask_async, isolation="asyncio", timeout=timeout)

    def ask(arguments: dict[str, Any]) -> Ok:
        scope = arguments["scope"]
        with reporting_model_progress(arguments["progress"]), \
                contextlib.nullcontext() if scope is None else scope():
            return _checked(model.respond(arguments["request"]))
    return Tool(_TOOL_NAME, handler=ask, isolation="thread", timeout=timeout)


def answer_of(result: HandlerResult, timeout: float) -> ModelAnswer:
    """The runner's result for a model call as the answer the machine takes."""
    if isinstance(result, Ok) and isinstance(result.value, ModelResponse):
        return result.value
    error = result.reason if isinstance(result, Err) else None
    if not isinstance(error, ToolError):
        return ModelError("invalid_response", f"the model call returned {result!r}")
    if isinstance(error.cause, ModelError):
        return error.cause
    if error.reason == "timeout":
        return ModelError("timeout", f"the model did not answer within {timeout:g} s",
                          cause=timeout)
    cause = error.cause
    detail = f"{type(cause).__name__}: {cause}" if isinstance(cause, BaseException) \
        else error.message
    return ModelError("raised", f"the model call failed: {detail}", cause=cause)


def machine_response(effect_id: int, answer: ModelAnswer) -> ModelReplied | NotPerformed:
    """The answer to ``LlmCall`` ``effect_id`` as its machine takes it (a ``ModelError``: the
    call was not performed)."""
    if isinstance(answer, ModelError):
        return NotPerformed(effect_id, answer)
    return ModelReplied(effect_id, answer)


class ModelCalls:
    """Starts the model calls of one agent's runs; the caller keeps each call's handle to
    cancel it. Thread-safe: it holds no mutable state."""

    def __init__(self, model: Model | AsyncModel, runner: ToolRunner, timeout: float) -> None:
        self._model = model
        self._tool = model_tool(model, timeout)
        self._runner = runner
        self._timeout = timeout

    @property
    def model(self) -> Model | AsyncModel:
        """The model these calls ask."""
        return self._model

    @property
    def timeout(self) -> float:
        """The seconds each attempt may take (the agent's ``model_timeout``)."""
        return self._timeout

    def start(self, request: ModelRequest, on_answer: Callable[[ModelAnswer], None],
              on_progress: ModelProgressSink | None = None,
              scope: Scope | None = None) -> CallHandle:
        """Ask the model; ``on_answer`` is called exactly once, on a runner thread, after
        every ``on_progress`` report the model made while it answered. The call runs within
        ``scope`` (on the thread or task that runs it)."""
        ask = _Ask(request, on_progress, scope, on_answer, self._timeout)
        return self._runner.start(self._tool, ask, None, ask)

    def close(self) -> None:
        """Close the model's connections, if it has ``async aclose()``, on the event loop its
        calls ran on (an SDK's HTTP connections belong to that loop). Call before the runner
        closes; a failure is logged, never raised."""
        aclose = getattr(self._model, "aclose", None)
        if not inspect.iscoroutinefunction(aclose):
            return

        async def close_model(arguments: dict[str, Any]) -> Ok:
            await aclose()
            return Ok()

        result = self._runner.run(Tool("model_close", handler=close_model, isolation="asyncio",
                                       timeout=_CLOSE_TIMEOUT), {})
        if not isinstance(result, Ok):
            _log.warning("model_close_failed", result=repr(result))
