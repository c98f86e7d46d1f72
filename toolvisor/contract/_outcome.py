"""One word for what a call came back with, as logs and traces name it."""

from __future__ import annotations

from toolvisor.contract._errors import InvalidArguments, ToolError
from toolvisor.contract._results import AskUser, Err, Halt, HandlerResult, Ok, Pending

_WORDS: dict[type, str] = {Ok: "ok", AskUser: "ask_user", Halt: "halt", Pending: "pending"}


def result_outcome(result: HandlerResult) -> str:
    """``ok``, ``ask_user``, ``halt``, ``pending``; for an ``Err``: the ``ToolError`` reason
    (a crash), ``invalid_arguments`` (the schema refused the arguments) or ``err`` (the
    handler's own report)."""
    if isinstance(result, Err):
        reason = result.reason
        if isinstance(reason, ToolError):
            return reason.reason
        return "invalid_arguments" if isinstance(reason, InvalidArguments) else "err"
    return _WORDS.get(type(result), "err")
