"""Encoding results as the text the model reads."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

from toolvisor.contract import (
    AskUser,
    Err,
    Halt,
    HandlerResult,
    InvalidArguments,
    Ok,
    Pending,
    ToolError,
)


def _json(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return to_json(value).decode()


def _error_payload(reason: Any) -> Any:
    if isinstance(reason, ToolError | InvalidArguments):
        return reason.for_model()
    if isinstance(reason, BaseException):
        return {"type": type(reason).__name__, "message": str(reason)}
    return reason


def encode(result: HandlerResult) -> str:
    """JSON text for a legal result (an ``Ok`` string as it is).

    Raises ``ToolError(reason="encoding_failed")`` with the cause when the value cannot be
    encoded; :func:`encode_checked` turns that into an ``Err`` result instead.
    """
    try:
        match result:
            case Ok(value):
                return value if isinstance(value, str) else _json(value)
            case Err(reason):
                return _json({"error": _error_payload(reason)})
            case AskUser(question, options):
                return _json({"ask_user": question, "options": options})
            case Halt(reason, value):
                return _json({"halt": reason, "result": value})
            case Pending(deadline, on_timeout, on_cancel):
                return _json({"pending": True, "deadline": deadline,
                              "on_timeout": on_timeout, "on_cancel": on_cancel})
    except Exception as exc:
        raise ToolError(
            "encoding_failed",
            f"tool error: encoding_failed: {type(exc).__name__}: {exc}",
            cause=exc,
        ) from exc
    raise TypeError(f"encode() takes a handler result, got {type(result).__name__}")


def encode_checked(
    result: HandlerResult, *, tool_name: str | None = None, tool_call_id: str | None = None
) -> tuple[HandlerResult, str]:
    """``(result, text)``; an unencodable result becomes ``Err(ToolError("encoding_failed"))``."""
    try:
        return result, encode(result)
    except ToolError as exc:
        label = f" ({tool_name})" if tool_name else ""
        cause = exc.cause
        failed = Err(ToolError(
            "encoding_failed",
            f"tool error{label}: encoding_failed: {type(cause).__name__}: {cause}",
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            cause=cause,
        ))
        return failed, encode(failed)
