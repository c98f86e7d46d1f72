"""toolvisor's supervision under pydantic-ai: ``SupervisedToolset``, a pydantic-ai toolset
whose every call runs under toolvisor's runner (``pip install '.[pydantic-ai]'`` in
toolvisor's clone).

A call's result is a value that crossed the actor and, for a ``process`` tool, the worker
process; it becomes pydantic-ai's control flow only here, at the toolset's edge (as
pydantic-ai's own durable toolsets carry ``CallDeferred`` or ``ModelRetry`` as data and raise
them again outside): ``Ok`` is the tool's return, ``Err`` (reported, a crash, a timeout, a
refusal) is ``ModelRetry`` or ``ToolFailed`` as the error policy picks, ``AskUser`` is a
deferred question (``CallDeferred(kind="question")``), ``Pending`` a deferred external call
carrying its completion key, ``Halt`` ends the run (``ToolHalted``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolvisor.adapters._answers import answer_refusal
from toolvisor.adapters._calls import Finished, SupervisedCalls
from toolvisor.adapters._errors import ToolHalted, missing_extra
from toolvisor.adapters._policy import (
    Channel,
    ErrorPolicy,
    channel_of,
    check_policy,
    retry_invalid_arguments,
)
from toolvisor.call import encode
from toolvisor.contract import AskUser, Err, Halt, Ok, Pending, Tool

try:
    from pydantic_ai import (
        CallDeferred,
        DeferredToolRequests,
        DeferredToolResults,
        ModelRetry,
        RunContext,
        ToolDefinition,
        ToolFailed,
    )
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
    from pydantic_ai.toolsets.external import TOOL_SCHEMA_VALIDATOR
except ImportError as missing:  # pragma: no cover - the dev extra installs it
    raise missing_extra("pydantic_ai", "pydantic-ai") from missing

__all__ = ["Channel", "ErrorPolicy", "SupervisedToolset", "ToolHalted",
           "retry_invalid_arguments"]

_KIND = "toolvisor"  # the metadata key naming what a deferred call waits for


class SupervisedToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset of ``tools`` (toolvisor ``Tool``s or typed functions), each call
    run by a :class:`~toolvisor.adapters.SupervisedCalls`.

    ``on_error`` picks the channel of each failed call (default: ``ModelRetry`` for refused
    arguments, ``ToolFailed`` for everything else); ``max_retries`` is pydantic-ai's retry
    budget per tool. Give ``calls`` to share one ``SupervisedCalls``, or its settings
    (``tool_timeout``, ``resilience``, ``store`` and ``run_id``, ``tracer_provider``, ...) to
    make one, which :meth:`close` (or leaving ``with``) closes. pydantic-ai enters and leaves a
    toolset on every run: that closes nothing.
    """

    def __init__(self, tools: Sequence[Tool | Callable[..., Any]] = (), *,
                 calls: SupervisedCalls | None = None, on_error: ErrorPolicy =
                 retry_invalid_arguments, max_retries: int = 1, id: str | None = None,
                 **settings: Any) -> None:
        if calls is not None and (tools or settings):
            raise ValueError("give either calls (a SupervisedCalls, which has its tools and "
                             "settings) or tools and settings, not both")
        self.on_error = check_policy(on_error)
        self._owned = calls is None
        self.calls = SupervisedCalls(tools, **settings) if calls is None else calls
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {name: ToolsetTool(
            toolset=self, max_retries=self.max_retries, args_validator=TOOL_SCHEMA_VALIDATOR,
            tool_def=ToolDefinition(name=name, description=tool.description,
                                    parameters_json_schema=dict(tool.input_schema),
                                    sequential=tool.scheduling == "serial"))
            for name, tool in self.calls.tools.items()}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        """Run the call under supervision; its result as pydantic-ai's control flow."""
        if ctx.tool_call_id is None:
            raise ValueError(f"pydantic-ai called {name!r} without a tool_call_id; a "
                             "SupervisedToolset runs the calls of a model's response")
        return self._returned(await self.calls.arun(name, tool_args, ctx.tool_call_id))

    def deferred_results(self, requests: DeferredToolRequests,
                         answers: Mapping[str, Any] | None = None) -> DeferredToolResults:
        """The results of this toolset's deferred calls in ``requests``, to resume the run
        with (``agent.run(..., deferred_tool_results=...)``).

        ``answers`` maps the ``tool_call_id`` of each question (``AskUser``) to its answer:
        a value or an ``Ok`` of one (one of the question's options, if it has any), or an
        ``Err`` (a failure, through the error policy). A pending call's result is read from
        the store: how its completion key was resolved (``ok`` its return, ``error`` a
        failure), or ``timeout`` past its deadline. Raises ``ValueError`` naming a wrong
        answer, or the calls still waiting or unanswered (the run stays resumable).
        """
        answers = dict(answers or {})
        results = DeferredToolResults()
        waiting = []
        for part in requests.calls:
            meta = requests.metadata.get(part.tool_call_id, {})
            kind = meta.get(_KIND)
            if kind == "ask_user":
                if part.tool_call_id not in answers:
                    waiting.append(f"{part.tool_call_id} (a question: {meta['question']!r})")
                    continue
                answer = answers.pop(part.tool_call_id)
                given = answer if isinstance(answer, Ok | Err) else Ok(answer)
                refusal = None if isinstance(given, Err) else answer_refusal(
                    part.tool_call_id, meta["question"], meta.get("options"), given.value)
                if refusal is not None:
                    raise ValueError(f"{refusal}; nothing was answered: answer with one of "
                                     "them (or an Err)")
                results.calls[part.tool_call_id] = self._value(given, encode(given))
            elif kind == "pending":
                done = self.calls.settle(part.tool_name, part.tool_call_id,
                                         meta["completion_key"])
                if done is None:
                    waiting.append(f"{part.tool_call_id} (pending on its completion key)")
                    continue
                assert isinstance(done.result, Ok | Err), done.result  # a settled wait
                results.calls[part.tool_call_id] = self._value(done.result, done.text)
        if answers:
            raise ValueError(f"answers for calls that asked nothing: {sorted(answers)}")
        if waiting:
            raise ValueError(f"calls still waiting: {', '.join(waiting)}; answer the questions "
                             "and resolve the keys, then ask again")
        return results

    def close(self) -> None:
        """Close the ``SupervisedCalls`` this toolset made (not one it was given)."""
        if self._owned:
            self.calls.close()

    def __enter__(self) -> SupervisedToolset:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _returned(self, done: Finished) -> Any:
        result = done.result
        match result:
            case Ok(value=value):
                return value
            case Err(reason=reason):
                raise self._failure(reason, done.text)
            case AskUser(question=question, options=options):
                raise CallDeferred({_KIND: "ask_user", "question": question,
                                    "options": None if options is None else list(options)},
                                   kind="question")
            case Pending(deadline=deadline):
                raise CallDeferred({_KIND: "pending", "completion_key": done.completion_key,
                                    "deadline": deadline})
            case Halt():
                raise ToolHalted(done.tool_name, done.tool_call_id, result)
        raise AssertionError(f"unexpected result {result!r}")  # pragma: no cover

    def _value(self, result: Ok | Err, text: str) -> Any:
        """A deferred call's result as ``DeferredToolResults`` carries it."""
        return result.value if isinstance(result, Ok) else self._failure(result.reason, text)

    def _failure(self, reason: Any, text: str) -> ModelRetry | ToolFailed:
        return ModelRetry(text) if channel_of(self.on_error, reason) == "retry" \
            else ToolFailed(text)
