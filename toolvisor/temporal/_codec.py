"""The JSON forms of what crosses Temporal: a call's result, a model's answer, a run's outcome.

Nothing is pickled: activities and the workflow exchange plain dicts (Temporal's JSON
converter), and these turn them back into toolvisor's values on the other side.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

from pydantic import Field, TypeAdapter
from pydantic_core import to_jsonable_python

from toolvisor.contract import (
    AskUser,
    Err,
    Halt,
    HandlerResult,
    ModelError,
    ModelResponse,
    Ok,
    Pending,
    ToolError,
)
from toolvisor.machine import Completed, Failed, Halted

FinalOutcome: TypeAlias = Completed | Halted | Failed
"""How a run on Temporal ends: the workflow's return value."""

_OUTCOMES: TypeAdapter[FinalOutcome] = TypeAdapter(
    Annotated[Completed | Halted | Failed, Field(discriminator="kind")])
_TOOL_ERROR = "toolvisor.tool_error"


def plain(value: Any) -> Any:
    """``value`` as JSON data: an exception becomes ``{"type", "message"}``, anything else
    JSON cannot hold its ``repr``."""
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": str(value)}
    return to_jsonable_python(value, fallback=repr)


def result_to_json(result: HandlerResult) -> dict[str, Any]:
    """A call's result as JSON data (an ``Err``'s ``ToolError`` kept whole, any other reason
    as :func:`plain` makes it; an ``Ok`` value JSON cannot hold becomes its ``repr``: the
    model's text of it is made before, from the value itself)."""
    match result:
        case Ok(value):
            return {"kind": "ok", "value": plain(value)}
        case Err(reason):
            reason = {_TOOL_ERROR: reason.to_dict()} if isinstance(reason, ToolError) \
                else plain(reason)
            return {"kind": "err", "value": reason}
        case AskUser(question, options, expires_in, default):
            return {"kind": "ask_user", "value": {"question": question, "options": options,
                                                  "expires_in": expires_in,
                                                  "default": default}}
        case Pending(deadline, on_timeout, on_cancel):
            return {"kind": "pending", "value": {"deadline": deadline, "on_timeout": on_timeout,
                                                 "on_cancel": on_cancel}}
        case Halt(reason, value):
            return {"kind": "halt", "value": {"reason": reason, "result": plain(value)}}
    raise TypeError(f"not a handler result: {type(result).__name__}")


def result_from_json(data: dict[str, Any]) -> HandlerResult:
    """The result :func:`result_to_json` made."""
    kind, value = data["kind"], data["value"]
    if kind == "ok":
        return Ok(value)
    if kind == "err":
        if isinstance(value, dict) and set(value) == {_TOOL_ERROR}:
            return Err(ToolError.from_dict(value[_TOOL_ERROR]))
        return Err(value)
    if kind == "ask_user":
        options = value["options"]
        return AskUser(value["question"], None if options is None else tuple(options),
                       value["expires_in"], value["default"])
    if kind == "pending":
        return Pending(value["deadline"], value["on_timeout"], value["on_cancel"])
    if kind == "halt":
        return Halt(value["reason"], value["result"])
    raise ValueError(f"unknown result kind {kind!r}")


def answer_to_json(answer: ModelResponse | ModelError) -> dict[str, Any]:
    """A model call's answer as JSON data."""
    if isinstance(answer, ModelError):
        return {"error": answer.to_dict()}
    return {"response": answer.model_dump(mode="json")}


def answer_from_json(data: dict[str, Any]) -> ModelResponse | ModelError:
    """The answer :func:`answer_to_json` made."""
    if "error" in data:
        return ModelError.from_dict(data["error"])
    return ModelResponse.model_validate(data["response"])


def outcome_to_json(outcome: FinalOutcome) -> dict[str, Any]:
    """A run's outcome as JSON data: the workflow's return value."""
    return outcome.model_dump(mode="json")


def outcome_from_json(data: Any) -> FinalOutcome:
    """The outcome :func:`outcome_to_json` made (``Completed``, ``Halted`` or ``Failed``)."""
    return _OUTCOMES.validate_python(data)
