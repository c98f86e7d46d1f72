"""Encoding results as the text the model reads; an error's text is capped at both ends.

Encoding is not part of ``execute``: it would break "the same object comes back" for the one
case it changes and make every call encode twice; ``encode_checked`` runs once, where a
result leaves its call actor. An error's text is capped here, not by the output budget,
because every error text is made here while the result object keeps the whole error.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

from toolvisor.call._budget import MAX_ERROR_BYTES, check_error_cap, keep_ends
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


def encode(result: HandlerResult, *, max_error_bytes: int | None = MAX_ERROR_BYTES) -> str:
    """JSON text for a legal result (an ``Ok`` string as it is).

    An ``Err``'s text over ``max_error_bytes`` (UTF-8; ``None``: no cap) keeps its head and
    tail around a ``...N bytes truncated...`` line (then it is no longer JSON); the result
    itself is unchanged, so a policy still sees the whole error. Raises
    ``ToolError(reason="encoding_failed")`` with the cause when the value cannot be encoded;
    :func:`encode_checked` turns that into an ``Err`` result instead.
    """
    check_error_cap(max_error_bytes)
    try:
        match result:
            case Ok(value):
                return value if isinstance(value, str) else _json(value)
            case Err(reason):
                text = _json({"error": _error_payload(reason)})
                return text if max_error_bytes is None else keep_ends(text, max_error_bytes)
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
    result: HandlerResult,
    *,
    tool_name: str | None = None,
    tool_call_id: str | None = None,
    max_error_bytes: int | None = MAX_ERROR_BYTES,
) -> tuple[HandlerResult, str]:
    """``(result, text)``; an unencodable result becomes ``Err(ToolError("encoding_failed"))``.

    ``max_error_bytes`` caps an error's text as :func:`encode` does.
    """
    try:
        return result, encode(result, max_error_bytes=max_error_bytes)
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
        return failed, encode(failed, max_error_bytes=max_error_bytes)
