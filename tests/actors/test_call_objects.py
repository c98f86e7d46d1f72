"""What a call holds while it waits: each object the cyclic garbage collector tracks is walked
by every full collection, and a wide batch (10,000 asyncio calls in flight) holds them all at
once. A call in flight holds no closure, partial or lock made for it alone (its deadline's
callback, its task's done callback, its supervision link's notify and its handle's cancel are
made once; its once-only flags are untracked dicts until someone waits), so its count stays
small."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

from toolvisor import Ok, Tool, ToolCall
from toolvisor.actors import CallReply, ToolCallDispatcher
from toolvisor.contract import ModelRequest, ModelResponse, UserMessage
from toolvisor.executor import ToolRunner
from toolvisor.host import ModelCalls
from toolvisor.supervisors import DynamicSupervisor

CALLS = 200
MAX_TRACKED_PER_CALL = 45  # measured: 42; 62 while its flags each had a lock and a list, and
# its deadline, task callback, link and handle each a closure or bound method of its own (the
# handler's own coroutine, task and context are part of it)


def test_an_asyncio_call_in_flight_holds_few_objects_the_collector_tracks() -> None:
    release = threading.Event()
    entered: list[None] = []

    async def wait(arguments: dict[str, Any]) -> Ok:
        entered.append(None)
        while not release.is_set():
            await asyncio.sleep(0.005)
        return Ok(None)

    tool = Tool(name="wait", handler=wait, isolation="asyncio")
    replies: list[CallReply] = []
    done = threading.Event()

    def reply(outcome: CallReply) -> None:
        replies.append(outcome)
        if len(replies) == CALLS:
            done.set()

    supervisor = DynamicSupervisor.start(max_children=CALLS, shutdown=1.0)
    try:
        with ToolRunner(tool_timeout=30.0) as runner, \
                ToolCallDispatcher(supervisor, runner) as dispatcher:
            warm = threading.Event()
            release.set()
            dispatcher.start_call(tool, ToolCall(id="warm", name="wait"), None,
                                  lambda outcome: warm.set())
            assert warm.wait(10)
            release.clear()
            entered.clear()
            gc.collect()
            gc.disable()
            try:
                before = len(gc.get_objects())
                for index in range(CALLS):
                    dispatcher.start_call(tool, ToolCall(id=f"c{index}", name="wait"), None,
                                          reply)
                while len(entered) < CALLS:
                    release.wait(0.005)
                gc.collect()
                per_call = (len(gc.get_objects()) - before) / CALLS
            finally:
                gc.enable()
                release.set()
            assert done.wait(10)
    finally:
        supervisor.stop()
    assert all(isinstance(r.result, Ok) for r in replies)
    assert per_call <= MAX_TRACKED_PER_CALL, per_call


MAX_TRACKED_PER_MODEL_CALL = 27  # measured: 26; 37 while its arguments were a dict and its
# on_done a closure with two cells, its progress and scope two blocks, and it had a progress
# sink of its own, its backend's stop bound for it and aexecute's (handler, arguments) pair
# kept through the await (the model's own coroutine, task and context are part of it)


class _Answers:
    """What a run is to its model call: it keeps the call's handle, and the answer comes to it
    (the cycle answers -> handle -> call -> on_answer -> answers, unless the call lets go)."""

    def __init__(self, expected: int) -> None:
        self.handles: list[Any] = []
        self.answers: list[Any] = []
        self._expected = expected
        self.done = threading.Event()

    def __call__(self, answer: Any) -> None:
        self.answers.append(answer)
        if len(self.answers) == self._expected:
            self.done.set()


class _Waits:
    """An async model that answers once ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered: list[None] = []

    async def arespond(self, request: ModelRequest) -> ModelResponse:
        self.entered.append(None)
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return ModelResponse(text="done")


def test_a_model_call_in_flight_holds_few_objects_and_lets_go_of_its_caller() -> None:
    """A model call in flight is a few objects for the collector, and once it answered it lets
    go of ``on_answer``: a caller that keeps the call's handle is freed without the collector."""
    model = _Waits()
    request = ModelRequest(messages=[UserMessage(content="hi")])
    with ToolRunner(tool_timeout=30.0) as runner:
        calls = ModelCalls(model, runner, 30.0)
        warm = _Answers(1)
        model.release.set()
        calls.start(request, warm)
        assert warm.done.wait(10)
        model.release.clear()
        model.entered.clear()
        answers = _Answers(CALLS)
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            answers.handles.extend(calls.start(request, answers) for _ in range(CALLS))
            while len(model.entered) < CALLS:
                model.release.wait(0.005)
            gc.collect()
            per_call = (len(gc.get_objects()) - before - 1) / CALLS  # less the handles' list
            model.release.set()
            assert answers.done.wait(10)
            assert all(isinstance(a, ModelResponse) for a in answers.answers)
            gone = weakref.ref(answers)
            settled = threading.Event()  # the runner's loop has moved on past the last task
            calls.start(request, lambda answer: settled.set())
            assert settled.wait(10)
            del answers
            assert gone() is None
        finally:
            gc.enable()
            model.release.set()
    assert per_call <= MAX_TRACKED_PER_MODEL_CALL, per_call
