"""toolvisor's supervision under the OpenAI Agents SDK: ``SupervisedFunctionTools``, one SDK
``FunctionTool`` per tool whose ``on_invoke_tool`` runs the call under toolvisor's runner
(``pip install '.[openai-agents]'`` in toolvisor's clone).

``Ok`` is the tool's output (its text); ``Err`` (reported, a crash, a timeout, a refusal) goes
to the SDK's failure channel: the error's JSON text is the output the model sees, and the
SDK's current span (the tool's ``function`` span) gets the error. Approval before a call runs
is the SDK's own ``needs_approval``. The SDK cannot suspend a call that has started: a
``Pending`` call waits in ``on_invoke_tool`` for its key (until its deadline), and an
``AskUser`` cannot be asked (the call fails ``invalid_return``, code ``cannot_ask``). ``Halt``
ends the run (``ToolHalted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from typing import Any

from toolvisor.adapters._calls import Finished, SupervisedCalls
from toolvisor.adapters._errors import ToolHalted, missing_extra
from toolvisor.contract import AskUser, Err, Halt, Ok, Pending, Tool, ToolError

try:
    from agents import FunctionTool
    from agents.tool_context import ToolContext
    from agents.tracing import SpanError, get_current_span
except ImportError as missing:  # pragma: no cover - the dev extra installs it
    raise missing_extra("agents", "openai-agents") from missing

__all__ = ["SupervisedFunctionTools", "ToolHalted"]

CANNOT_ASK = "cannot_ask"
"""The code of a call that returned ``AskUser``, which the SDK cannot ask mid-call."""
_KEY_POLL = 1.0  # seconds one wait for a pending key lasts before it looks at the task again


class SupervisedFunctionTools:
    """``tools`` (toolvisor ``Tool``s or typed functions) as the SDK's ``FunctionTool``s
    (``function_tools``), each call run by a :class:`~toolvisor.adapters.SupervisedCalls`.

    ``needs_approval`` is ``True`` (every tool), the names of the tools whose calls wait for
    an approval (``RunState.approve`` / ``reject``) before they run, or ``False``. Give
    ``calls`` to share one ``SupervisedCalls``, or its settings (``tool_timeout``,
    ``resilience``, ``store`` and ``run_id``, ``tracer_provider``, ...) to make one, which
    :meth:`close` (or leaving ``with``) closes.
    """

    def __init__(self, tools: Sequence[Tool | Callable[..., Any]] = (), *,
                 calls: SupervisedCalls | None = None,
                 needs_approval: bool | Collection[str] = False, **settings: Any) -> None:
        if calls is not None and (tools or settings):
            raise ValueError("give either calls (a SupervisedCalls, which has its tools and "
                             "settings) or tools and settings, not both")
        self._owned = calls is None
        self.calls = SupervisedCalls(tools, **settings) if calls is None else calls
        if not isinstance(needs_approval, bool):
            unknown = sorted(set(needs_approval) - set(self.calls.tools))
            if isinstance(needs_approval, str) or unknown:
                self.close()
                raise ValueError(f"needs_approval names tools that are not given: "
                                 f"{unknown or needs_approval!r}; tools: "
                                 f"{sorted(self.calls.tools)}")
        self.function_tools: list[FunctionTool] = [
            self._function_tool(tool, needs_approval if isinstance(needs_approval, bool)
                                else tool.name in needs_approval)
            for tool in self.calls.tools.values()]

    def close(self) -> None:
        """Close the ``SupervisedCalls`` this object made (not one it was given)."""
        if self._owned:
            self.calls.close()

    def __enter__(self) -> SupervisedFunctionTools:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _function_tool(self, tool: Tool, needs_approval: bool) -> FunctionTool:
        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            return await self._invoke(tool.name, arguments, ctx.tool_call_id)

        return FunctionTool(name=tool.name, description=tool.description,
                            params_json_schema=dict(tool.input_schema), on_invoke_tool=invoke,
                            strict_json_schema=False, needs_approval=needs_approval)

    async def _invoke(self, tool_name: str, arguments: str, tool_call_id: str) -> str:
        done = await self.calls.arun(tool_name, arguments, tool_call_id)
        while True:
            result = done.result
            match result:
                case Ok():
                    return done.text
                case Err():
                    _report_failure(done)
                    return done.text
                case Pending():
                    done = await self._wait(done)
                case AskUser(question=question):
                    done = self.calls.answer(tool_name, tool_call_id, Err(ToolError(
                        "invalid_return", f"tool error ({tool_name}): invalid_return: the "
                        f"tool asked {question!r}, and the OpenAI Agents SDK cannot ask a "
                        "question once a call has started; declare the tool with "
                        "needs_approval to ask before it runs", tool_name=tool_name,
                        tool_call_id=tool_call_id, code=CANNOT_ASK)))
                case Halt():
                    raise ToolHalted(tool_name, tool_call_id, result)

    async def _wait(self, done: Finished) -> Finished:
        """A pending call's result: its key resolved, or ``timeout`` at its deadline."""
        journal = self.calls.journal
        key = done.completion_key
        assert journal is not None and key is not None  # Pending needs a store and a key
        while True:
            settled = self.calls.settle(done.tool_name, done.tool_call_id, key)
            if settled is not None:
                return settled
            await asyncio.to_thread(journal.store.wait_for, key, _KEY_POLL)


def _report_failure(done: Finished) -> None:
    """Put the failure on the SDK's current span (the tool's), as its own failures are."""
    span = get_current_span()
    if span is not None:
        reason = done.result.reason if isinstance(done.result, Err) else None
        kind = reason.reason if isinstance(reason, ToolError) else "tool_error"
        span.set_error(SpanError(message=f"toolvisor: {kind}",
                                 data={"tool_name": done.tool_name, "error": done.text}))

