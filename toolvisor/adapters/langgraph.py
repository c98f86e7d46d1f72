"""toolvisor's supervision under LangGraph: ``SupervisedTools``, the ``wrap_tool_call`` /
``awrap_tool_call`` of a ``ToolNode`` that runs each call under toolvisor's runner
(``pip install '.[langgraph]'`` in toolvisor's clone).

``Ok`` is a ``ToolMessage``, ``Err`` (reported, a crash, a timeout, a refusal) one with
``status="error"`` and the error's JSON text; ``AskUser`` and ``Pending`` are ``interrupt()``s,
and resuming answers them (an answer that does not fit the question is asked again, never
raised); ``Halt`` ends the graph's run (``ToolHalted``). LangGraph re-runs an
interrupted node from its start: with a store, each call of the node that already ran is
replayed from its record by ``tool_call_id``, not run again. The questions of one node run are
asked one at a time in tool-call order (:mod:`toolvisor.adapters._turns`), so each resume
value reaches the call it answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from toolvisor.adapters._answers import answer_refusal
from toolvisor.adapters._calls import Finished, SupervisedCalls
from toolvisor.adapters._errors import ToolHalted, missing_extra
from toolvisor.adapters._turns import NodeRun, NodeRuns
from toolvisor.contract import AskUser, Err, Halt, Ok, Pending, Tool

try:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.errors import GraphInterrupt
    from langgraph.prebuilt import ToolNode
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command, interrupt
except ImportError as missing:  # pragma: no cover - the dev extra installs it
    raise missing_extra("langgraph", "langgraph") from missing

__all__ = ["SupervisedTools", "ToolHalted"]

Returned = ToolMessage | Command[Any]


class SupervisedTools:
    """The calls of ``tools`` (toolvisor ``Tool``s or typed functions) in a LangGraph
    ``ToolNode``, each run by a :class:`~toolvisor.adapters.SupervisedCalls`.

    :meth:`node` is a ``ToolNode`` with these tools and this object's wrappers;
    ``langchain_tools`` the same tools as LangChain tools (for ``model.bind_tools``). The
    wrappers also fit a ``ToolNode`` of your own, where a call of any other tool runs as the
    node runs it. Give ``calls`` to share one ``SupervisedCalls``, or its settings
    (``tool_timeout``, ``resilience``, ``store`` and ``run_id``, ``tracer_provider``, ...) to
    make one, which :meth:`close` (or leaving ``with``) closes.
    """

    def __init__(self, tools: Sequence[Tool | Callable[..., Any]] = (), *,
                 calls: SupervisedCalls | None = None, **settings: Any) -> None:
        if calls is not None and (tools or settings):
            raise ValueError("give either calls (a SupervisedCalls, which has its tools and "
                             "settings) or tools and settings, not both")
        self._owned = calls is None
        self.calls = SupervisedCalls(tools, **settings) if calls is None else calls
        self._runs = NodeRuns()
        self.langchain_tools: list[BaseTool] = [self._langchain_tool(t)
                                                for t in self.calls.tools.values()]

    def node(self, **options: Any) -> ToolNode:
        """A ``ToolNode`` running these tools under supervision (``options``: the node's
        own, such as ``name``)."""
        return ToolNode(self.langchain_tools, wrap_tool_call=self.wrap_tool_call,
                        awrap_tool_call=self.awrap_tool_call, **options)

    def wrap_tool_call(self, request: ToolCallRequest,
                       execute: Callable[[ToolCallRequest], Returned]) -> Returned:
        """``ToolNode``'s sync hook: run the call under supervision (another tool's call
        runs through ``execute``)."""
        call = request.tool_call
        if call["name"] not in self.calls.tools:
            return execute(request)
        call_id = _call_id(call)
        entered = self._enter(request, call_id)
        raised = True
        try:
            done = self.calls.run(call["name"], call["args"], call_id)
            if entered is not None and _asks(done) and not entered[1].wait_turn(call_id):
                raise GraphInterrupt(())  # an earlier call's question interrupted the node
            message = self._message(done)
            raised = False
            return message
        finally:
            if entered is not None:
                self._runs.leave(*entered, call_id, raised=raised)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              execute: Callable[[ToolCallRequest], Awaitable[Returned]]
                              ) -> Returned:
        """``ToolNode``'s async hook, as :meth:`wrap_tool_call`."""
        call = request.tool_call
        if call["name"] not in self.calls.tools:
            return await execute(request)
        call_id = _call_id(call)
        entered = self._enter(request, call_id)
        raised = True
        try:
            done = await self.calls.arun(call["name"], call["args"], call_id)
            if entered is not None and _asks(done) \
                    and not await entered[1].await_turn(call_id):
                raise GraphInterrupt(())  # an earlier call's question interrupted the node
            message = self._message(done)
            raised = False
            return message
        finally:
            if entered is not None:
                self._runs.leave(*entered, call_id, raised=raised)

    def _enter(self, request: ToolCallRequest, call_id: str
               ) -> tuple[tuple[str, int], NodeRun] | None:
        """The turns of the node run this call belongs to (``None``: its questions are not
        ordered); see :mod:`toolvisor.adapters._turns`."""
        runtime = request.runtime  # None outside a graph
        config = {} if runtime is None else runtime.config
        return self._runs.enter(request.state, config, call_id, self.calls.tools)

    def close(self) -> None:
        """Close the ``SupervisedCalls`` this object made (not one it was given)."""
        if self._owned:
            self.calls.close()

    def __enter__(self) -> SupervisedTools:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _message(self, done: Finished) -> ToolMessage:
        """The call's ``ToolMessage``; a question or a pending call interrupts the graph
        first (again, on each resume that leaves a pending key unresolved).

        Each ``interrupt()`` of the node takes the task's next resume value, so a call
        replayed from its record takes again the values it took before it finished
        (``resumes``), and the calls after it get theirs. (A thread that holds fewer, forked
        from a checkpoint before those answers, is interrupted with an ``answered`` payload;
        the recorded result stands.)"""
        for _ in range(done.resumes if done.replayed else 0):
            interrupt({"toolvisor": "answered", "tool_call_id": done.tool_call_id,
                       "tool_name": done.tool_name})
        while True:
            result = done.result
            match result:
                case Ok():
                    return ToolMessage(done.text, tool_call_id=done.tool_call_id,
                                       name=done.tool_name)
                case Err():
                    return ToolMessage(done.text, tool_call_id=done.tool_call_id,
                                       name=done.tool_name, status="error")
                case AskUser(question=question, options=options):
                    answer, taken = _answer(done, question, options)
                    done = self.calls.answer(done.tool_name, done.tool_call_id, Ok(answer),
                                             resumes=taken)
                case Pending(deadline=deadline):
                    done = self._settled(done, deadline)
                case Halt():
                    raise ToolHalted(done.tool_name, done.tool_call_id, result)

    def _settled(self, done: Finished, deadline: float | None) -> Finished:
        """The result of a pending call once its key is resolved; until then it interrupts.

        The call first takes every resume value the thread holds for it (each resume is a
        nudge to look again), then looks: that way the number it took depends on the
        thread's resume values only, never on when the key was resolved, and is recorded
        with the result for a replay to take as many."""
        key = done.completion_key
        assert key is not None  # the executor refuses Pending without one
        waiting = {"toolvisor": "pending", "tool_call_id": done.tool_call_id,
                   "tool_name": done.tool_name, "completion_key": key, "deadline": deadline}
        taken = 0
        while True:
            try:
                interrupt(waiting)
            except GraphInterrupt:
                settled = self.calls.settle(done.tool_name, done.tool_call_id, key,
                                            resumes=taken)
                if settled is None:
                    raise
                return settled
            taken += 1

    def _langchain_tool(self, tool: Tool) -> BaseTool:
        """``tool`` as LangChain sees it: its name, description and JSON schema; called
        outside a wrapped ``ToolNode`` it still runs under supervision."""
        calls = self.calls

        def run(**arguments: Any) -> str:
            return calls.run(tool.name, arguments, uuid.uuid4().hex).text

        return StructuredTool(name=tool.name, description=tool.description,
                              args_schema=dict(tool.input_schema), func=run)


def _answer(done: Finished, question: str, options: tuple[str, ...] | None
            ) -> tuple[Any, int]:
    """The answer to the call's question (an ``interrupt()``'s resume value that fits it),
    and how many resume values it took to get one.

    LangGraph keeps each resume value and hands it back to the same ``interrupt()`` whenever
    the node runs again, so a wrong answer must not raise (it would be raised again on every
    later resume): it is kept, and the question asked again with a new ``interrupt()`` whose
    payload also says what was wrong (``refused``). The thread stays at its question, and the
    next answer that fits is the one returned."""
    asked: dict[str, Any] = {"toolvisor": "ask_user", "tool_call_id": done.tool_call_id,
                             "tool_name": done.tool_name, "question": question,
                             "options": None if options is None else list(options)}
    taken = 0
    while True:
        answer = interrupt(asked)
        taken += 1
        refusal = answer_refusal(done.tool_call_id, question, options, answer)
        if refusal is None:
            return answer, taken
        asked = {**asked, "refused": refusal}


def _asks(done: Finished) -> bool:
    """Whether the call's message may need an ``interrupt()``: a question, a pending call, or
    a replayed call that took resume values."""
    return isinstance(done.result, AskUser | Pending) or (done.replayed and done.resumes > 0)


def _call_id(call: Any) -> str:
    call_id = call.get("id")
    if not call_id:
        raise ValueError(f"the tool call {call.get('name')!r} has no id; a supervised call "
                         "is recorded and replayed by its id, so the model must give one")
    return str(call_id)
