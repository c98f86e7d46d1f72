"""``agent_tool``: an agent as a tool whose every call runs it as a child session."""

from __future__ import annotations

from typing import Any

from toolvisor.contract import (
    AskUser,
    CallContext,
    CapabilityError,
    Err,
    Ok,
    Pending,
    Tool,
    ToolError,
)
from toolvisor.machine import Completed, Failed, Halted, Suspended

_PROMPT_SCHEMA = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "what to ask the agent"}},
    "required": ["prompt"],
    "additionalProperties": False,
}


class AgentToolHandler:
    """The handler of ``Agent.as_tool``: runs ``agent`` as a child session. It names its agent,
    so a parent resumed after a restart finds the agent hosting a child it relayed."""

    def __init__(self, agent: Any, name: str) -> None:
        self.agent = agent
        self._name = name

    def __call__(self, arguments: dict[str, Any], ctx: CallContext) -> Ok | Err | AskUser | Pending:
        if ctx.sessions is None:
            raise CapabilityError("sessions_unavailable", f"tool {self._name!r} runs an agent "
                                  "as a child session: call it from an Agent's run")
        outcome = ctx.sessions.start_turn(arguments["prompt"], agent=self.agent)
        if isinstance(outcome, Suspended) and len(outcome.call_ids) == 1 \
                and (outcome.questions or (outcome.keys and ctx.completion_keys is not None)):
            return ctx.sessions.relay(outcome)
        return outcome_result(outcome, self._name)


def agent_tool(agent: Any, *, name: str, description: str,
               timeout: float | None = None) -> Tool:
    """The ``Tool`` of ``Agent.as_tool``: ``{"prompt": str}`` in, the child's text out; a
    child's question is asked through the calling run (``ctx.sessions.relay``)."""
    return Tool(name=name, description=description, input_schema=_PROMPT_SCHEMA,
                handler=AgentToolHandler(agent, name), timeout=timeout)


def outcome_result(outcome: Any, tool_name: str) -> Ok | Err:
    """A child run's outcome as its call's result: its text, else an ``Err`` saying why."""
    run_id = getattr(outcome, "run_id", None)
    match outcome:
        case Completed(text=text):
            return Ok(text)
        case Failed(error=error):
            why = f"failed: {error}"
        case Halted(reason=reason):
            why = f"halted: {reason}"
        case Suspended():
            why = f"suspended, waiting on {sorted(outcome.call_ids)}"
        case _:
            why = f"ended with {type(outcome).__name__}"
    return Err(ToolError("handler_raised", f"tool error ({tool_name}): the child session "
                         f"{run_id} {why}", tool_name=tool_name, code="child_session_failed",
                         cause=why))
