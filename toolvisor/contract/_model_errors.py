"""``ModelError``: whatever went wrong in one model call, as one reason from a closed set.

Provider adapters raise it with the reason they know (a 429 is ``rate_limited`` with the
``retry_after`` the provider asked for); the host turns everything else into one (a deadline is
``timeout``, any other exception ``raised``). The ``on_model_error`` policy decides on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, get_args

from toolvisor.contract._errors import ToolvisorError, _plain
from toolvisor.contract._seconds import check_seconds

ModelErrorReason: TypeAlias = Literal[
    "timeout",
    "rate_limited",
    "unavailable",
    "rejected",
    "invalid_response",
    "raised",
]
MODEL_ERROR_REASONS: frozenset[str] = frozenset(get_args(ModelErrorReason))
RETRYABLE_MODEL_ERRORS: frozenset[str] = frozenset({"timeout", "rate_limited", "unavailable"})
"""What the default ``on_model_error`` policy retries: failures that may pass by themselves."""

_FIELDS = frozenset({"reason", "message", "retry_after", "status", "cause", "attempt"})


class ModelError(ToolvisorError):
    """One model call failed. ``reason`` is one of :data:`MODEL_ERROR_REASONS`:

    ``timeout`` (no answer within the attempt's deadline), ``rate_limited`` (429),
    ``unavailable`` (5xx, overloaded, connection errors, a broken stream), ``rejected`` (a 4xx
    request that will never succeed: never retried by default), ``invalid_response`` (an answer
    that is not a ``ModelResponse``), ``raised`` (any other exception; ``cause`` is it).
    ``retry_after`` is the wait in seconds the provider asked for, if it did; ``status`` the
    HTTP status, if any; ``attempt`` which attempt of the model call failed (set by the host).
    Serialisable with :meth:`to_dict` / :meth:`from_dict` (checkpoints keep it as JSON).
    """

    reason: ModelErrorReason
    message: str
    retry_after: float | None
    status: int | None
    cause: Any
    attempt: int

    def __init__(self, reason: ModelErrorReason, message: str | None = None, *,
                 retry_after: float | None = None, status: int | None = None,
                 cause: Any = None, attempt: int = 1) -> None:
        if reason not in MODEL_ERROR_REASONS:
            raise ValueError(f"unknown ModelError reason {reason!r}; expected one of "
                             f"{sorted(MODEL_ERROR_REASONS)}")
        check_seconds("ModelError.retry_after", retry_after, optional=True)
        message = message or f"model error: {reason}"
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after = None if retry_after is None else float(retry_after)
        self.status = status
        self.cause = cause
        self.attempt = attempt

    def __repr__(self) -> str:
        return f"ModelError(reason={self.reason!r}, message={self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelError):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = Exception.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.to_dict(),))

    def with_attempt(self, attempt: int) -> ModelError:
        """The same error, marked as the failure of attempt ``attempt``."""
        return ModelError(self.reason, self.message, retry_after=self.retry_after,
                          status=self.status, cause=self.cause, attempt=attempt)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (an exception ``cause`` becomes ``{"type", "message"}``)."""
        return {"reason": self.reason, "message": self.message, "retry_after": self.retry_after,
                "status": self.status, "cause": _plain(self.cause), "attempt": self.attempt}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelError:
        """Rebuild from :meth:`to_dict` output; an unknown reason or field is a ``ValueError``."""
        if not isinstance(data, Mapping) or "reason" not in data:
            raise ValueError("ModelError.from_dict needs a mapping with a 'reason'")
        unknown = set(data) - _FIELDS
        if unknown:
            raise ValueError(f"ModelError.from_dict: unknown field(s) {sorted(unknown)}")
        return cls(data["reason"], data.get("message"), retry_after=data.get("retry_after"),
                   status=data.get("status"), cause=data.get("cause"),
                   attempt=data.get("attempt", 1))


def _rebuild(data: dict[str, Any]) -> ModelError:
    return ModelError.from_dict(data)
