"""Conformance of ``execute`` with docs/design.md, "The executor contract": every legal shape,
every reason."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import threading
import weakref
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from toolvisor import (
    AskUser,
    CallContext,
    Err,
    Halt,
    InvalidArguments,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolError,
    tool,
)
from toolvisor.call import aexecute, execute
from toolvisor.executor import Deadline, DeadlineTimer, ToolRunner

LEGAL = [Ok(1), Ok(None), Err("reported"), Err({"code": 7}), AskUser("continue?"),
         AskUser("pick", ("a", "b")), Halt("enough", {"n": 1}), Pending(deadline=3)]


class TakenKey:
    """A completion-key capability whose key was taken (the executor reads ``issued``)."""

    issued = "key"

    def issue(self) -> str:
        return self.issued


KEYED = CallContext(completion_keys=TakenKey())


def echo(arguments: Any) -> Ok:
    return Ok(arguments)


def returning(value: Any) -> Tool:
    return Tool(name="t", handler=lambda arguments: value)


def tool_error(result: Any) -> ToolError:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason


@pytest.mark.parametrize("result", LEGAL, ids=repr)
def test_legal_results_pass_through_as_the_very_same_object(result: Any) -> None:
    assert execute(returning(result), {}, KEYED) is result


def test_pending_without_a_completion_key_is_invalid_return_with_its_code() -> None:
    error = tool_error(execute(returning(Pending()), {}))
    assert error.reason == "invalid_return"
    assert error.code == "pending_tool_missing_completion_key"


def test_a_reported_err_is_not_wrapped() -> None:
    reported = Err(ToolError("timeout"))  # even a ToolError the handler chose to return
    assert execute(returning(reported), {}) is reported


def test_a_raise_is_handler_raised_with_the_exception_as_cause() -> None:
    boom = ValueError("boom")

    def handler(arguments: Any) -> Ok:
        raise boom

    error = tool_error(execute(Tool(name="t", handler=handler), {},
                               CallContext(tool_call=ToolCall(id="c9", name="t"))))
    assert error.reason == "handler_raised"
    assert error.cause is boom
    assert (error.tool_name, error.tool_call_id) == ("t", "c9")
    assert error.message == "tool error (t): handler_raised: ValueError: boom"


@pytest.mark.parametrize(("exc", "cause"), [(SystemExit(3), 3), (SystemExit("bye"), "bye")])
def test_system_exit_is_handler_exit_with_the_exit_code(exc: BaseException, cause: Any) -> None:
    def handler(arguments: Any) -> Ok:
        raise exc

    error = tool_error(execute(Tool(name="t", handler=handler), {}))
    assert (error.reason, error.cause) == ("handler_exit", cause)


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, GeneratorExit, asyncio.CancelledError])
def test_other_base_exceptions_are_handler_exit(exc_type: type[BaseException]) -> None:
    def handler(arguments: Any) -> Ok:
        raise exc_type()

    error = tool_error(execute(Tool(name="t", handler=handler), {}))
    assert error.reason == "handler_exit"
    assert isinstance(error.cause, exc_type)


@pytest.mark.parametrize("garbage", [None, 42, "text", {"ok": 1}, [Ok(1)], Ok, object()])
def test_anything_else_returned_is_invalid_return_with_the_value_as_cause(garbage: Any) -> None:
    error = tool_error(execute(returning(garbage), {}))
    assert error.reason == "invalid_return"
    assert error.cause is garbage


def test_a_tool_without_handler_is_not_found() -> None:
    error = tool_error(execute(Tool(name="manual"), {}))
    assert error.reason == "not_found"
    assert "declared for manual use" in error.message


def test_arity_two_receives_the_context_unchanged() -> None:
    seen: list[Any] = []

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        seen.append(ctx)
        return Ok(arguments)

    ctx = CallContext(session_id="s", request_id="r", context={"user": "ada"})
    assert execute(Tool(name="t", handler=handler), {"a": 1}, ctx) == Ok({"a": 1})
    assert seen == [ctx] and seen[0] is ctx


def test_a_missing_context_reads_as_none() -> None:
    seen: list[CallContext] = []

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        seen.append(ctx)
        return Ok(1)

    execute(Tool(name="t", handler=handler), {})
    ctx = seen[0]
    assert (ctx.session_id, ctx.request_id, ctx.tool_call, ctx.context, ctx.engine,
            ctx.tool_call_id, ctx.state) == (None,) * 7
    assert not ctx.cancelled.is_set()


def test_invalid_arguments_list_every_violation_and_never_reach_the_handler() -> None:
    calls: list[Any] = []
    schema = {"type": "object", "required": ["a", "b"], "additionalProperties": False,
              "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                             "c": {"type": "array", "items": {"type": "integer"}}}}
    checked = Tool(name="t", input_schema=schema, handler=lambda a: calls.append(a) or Ok(1))
    result = execute(checked, {"a": "x", "c": [1, "two"], "d": 0})
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments)
    paths = {(v.path, v.validator) for v in result.reason.violations}
    assert paths == {("$", "required"), ("$", "additionalProperties"), ("$.a", "type"),
                     ("$.c[1]", "type")}
    assert calls == []


def test_arguments_that_are_not_an_object_are_refused() -> None:
    result = execute(Tool(name="t", handler=echo), ["not", "an", "object"])
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments)
    assert [(v.path, v.message) for v in result.reason.violations] == [
        ("$", "arguments must be a JSON object, got list")]


class Query(BaseModel):
    text: str
    limit: int = 5


def test_typed_arguments_arrive_converted() -> None:
    @tool
    def search(arguments: Query) -> Ok:
        return Ok((type(arguments).__name__, arguments.text, arguments.limit))

    assert execute(search, {"text": "otp"}) == Ok(("Query", "otp", 5))
    result = execute(search, {"text": 1})
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments)
    assert result.reason.violations[0].path == "$.text"


class Touchy(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def crashes(cls, value: str) -> str:
        raise KeyError(value)  # not a ValueError: pydantic lets it through


def validation_raised(result: Any) -> InvalidArguments:
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments), result
    (violation,) = result.reason.violations
    assert (violation.path, violation.validator) == ("$", "validation_raised")
    return result.reason


def test_an_exception_while_validating_is_invalid_arguments_and_never_a_raise() -> None:
    calls: list[Any] = []

    @tool
    def touchy(arguments: Touchy) -> Ok:
        calls.append(arguments)
        return Ok(1)

    error = validation_raised(execute(touchy, {"text": "boom"}))
    assert "validating them raised KeyError: 'boom'" in error.violations[0].message
    assert isinstance(error.__cause__, KeyError)
    assert validation_raised(asyncio.run(aexecute(touchy, {"text": "boom"})))
    with ToolRunner() as runner:
        assert validation_raised(runner.run(touchy, {"text": "boom"}))
    assert calls == []


def test_arguments_nested_past_the_recursion_limit_are_invalid_arguments() -> None:
    recursive = Tool(name="r", handler=echo, input_schema={
        "type": "object", "properties": {"next": {"$ref": "#"}}})
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"next": deep}
    error = validation_raised(execute(recursive, deep))
    assert isinstance(error.__cause__, RecursionError)


async def coroutine_handler(arguments: Any) -> Ok:
    await asyncio.sleep(0)
    return Ok(arguments["n"] + 1)


def test_async_handlers_are_refused_by_execute_and_run_by_aexecute() -> None:
    async_tool = Tool(name="a", handler=coroutine_handler)
    with pytest.raises(TypeError, match="isolation='asyncio'"):
        execute(async_tool, {"n": 1})
    assert asyncio.run(aexecute(async_tool, {"n": 1})) == Ok(2)


def test_aexecute_normalises_like_execute() -> None:
    async def raising(arguments: Any) -> Ok:
        raise RuntimeError("no")

    async def garbage(arguments: Any) -> int:
        return 3

    assert tool_error(asyncio.run(aexecute(Tool(name="r", handler=raising), {}))).reason == \
        "handler_raised"
    assert tool_error(asyncio.run(aexecute(Tool(name="g", handler=garbage), {}))).reason == \
        "invalid_return"
    assert asyncio.run(aexecute(returning(Ok(1)), {})) == Ok(1)
    assert tool_error(asyncio.run(aexecute(Tool(name="m"), {}))).reason == "not_found"


class _HoldsItsDeadline:
    """What a call is to its deadline: it keeps the deadline, whose callback refers to it."""

    deadline: Deadline | None = None


def _wait_until_past(timer: DeadlineTimer) -> None:
    """Returns once the timer has moved on past the callbacks that fired before."""
    after = threading.Event()
    timer.schedule(0.0, after.set)
    assert after.wait(5)


def test_a_deadline_lets_go_of_its_callback_once_cancelled_or_fired() -> None:
    """Once cancelled or fired, a deadline drops its callback: the holder and its deadline
    (a reference cycle through the callback) are freed at once, not left for the cyclic
    garbage collector."""
    timer = DeadlineTimer("test-deadlines")
    gc.disable()
    try:
        for fire in (False, True):
            holder = _HoldsItsDeadline()
            fired = threading.Event()
            holder.deadline = timer.schedule(0.0 if fire else 60.0,
                                             lambda h=holder: fired.set())
            if fire:
                assert fired.wait(5)
                _wait_until_past(timer)
            else:
                holder.deadline.cancel()
            gone = weakref.ref(holder)
            del holder
            assert gone() is None, "fired" if fire else "cancelled"
    finally:
        gc.enable()
        timer.close()


def test_a_deadline_with_an_argument_calls_back_with_it_and_then_lets_go_of_it() -> None:
    """``schedule_with``: one callback for many deadlines, each called with its own argument
    (no closure per deadline), which the deadline drops once cancelled or fired."""
    timer = DeadlineTimer("test-deadlines")
    seen: list[_HoldsItsDeadline] = []
    fired = threading.Event()

    def due(holder: _HoldsItsDeadline) -> None:
        seen.append(holder)
        fired.set()

    gc.disable()
    try:
        for fire in (False, True):
            holder = _HoldsItsDeadline()
            holder.deadline = timer.schedule_with(0.0 if fire else 60.0, due, holder)
            if fire:
                assert fired.wait(5) and seen == [holder]
                seen.clear()
                _wait_until_past(timer)
            else:
                holder.deadline.cancel()
            gone = weakref.ref(holder)
            del holder
            assert gone() is None, "fired" if fire else "cancelled"
        assert not seen  # the cancelled one never called back
    finally:
        gc.enable()
        timer.close()


def test_the_handler_gets_every_field_of_its_context_with_its_own_token_and_sink() -> None:
    """The runner copies the caller's context field by field (no ``dataclasses.replace``):
    every field but the cancel token and the progress sink reaches the handler as it was."""
    given = CallContext(**{f.name: object() for f in dataclasses.fields(CallContext)})
    seen: list[CallContext] = []

    def look(arguments: Any, ctx: CallContext) -> Ok:
        seen.append(ctx)
        return Ok(None)

    with ToolRunner(tool_timeout=5.0) as runner:
        assert isinstance(runner.run(Tool(name="look", handler=look), {}, given), Ok)
    [ctx] = seen
    for field in dataclasses.fields(CallContext):
        if field.name in ("cancelled", "progress"):
            assert getattr(ctx, field.name) is not getattr(given, field.name), field.name
        else:
            assert getattr(ctx, field.name) is getattr(given, field.name), field.name


def test_a_call_without_a_context_or_idle_timeout_gets_no_progress_sink() -> None:
    """A call started without a context (a model call), to a tool without ``idle_timeout``,
    gets no ``ctx.progress``: its reports would go nowhere and nothing reads its signs of life.
    Given a context, or an ``idle_timeout`` to keep, it gets the runner's sink."""
    seen: list[CallContext] = []

    def look(arguments: Any, ctx: CallContext) -> Ok:
        ctx.report_progress("half", 0.5)  # goes nowhere without a sink: no error
        seen.append(ctx)
        return Ok(None)

    bare = Tool("look", handler=look)
    watched = Tool("look", handler=look, idle_timeout=30.0)
    with ToolRunner() as runner:
        results = [runner.run(bare, {}), runner.run(watched, {}),
                   runner.run(bare, {}, CallContext())]
    assert all(isinstance(r, Ok) for r in results), results
    assert [ctx.progress is None for ctx in seen] == [True, False, False]
