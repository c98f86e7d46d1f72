"""``ToolvisorError`` (the base of every exception the package defines), ``ToolError`` (the
closed set of crash reasons), ``InvalidArguments``, handler errors and ``CapabilityError`` (a
call context's capability missing or refused)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from pydantic_core import to_jsonable_python

ToolErrorReason: TypeAlias = Literal[
    "handler_raised",
    "handler_exit",
    "timeout",
    "invalid_return",
    "encoding_failed",
    "not_found",
]
TOOL_ERROR_REASONS: frozenset[str] = frozenset(get_args(ToolErrorReason))


def _plain(value: Any) -> Any:
    """A JSON-safe stand-in for ``value``; exceptions become ``{type, message}``."""
    if isinstance(value, BaseException):
        return {"type": type(value).__qualname__, "message": str(value)}
    try:
        return to_jsonable_python(value)
    except Exception:
        return repr(value)


class ToolvisorError(Exception):
    """The base of every exception toolvisor defines: ``except ToolvisorError`` catches them all.

    Each also derives from the built-in class it refines (``ValueError``, ``LookupError``, ...),
    so code that catches those keeps working.
    """


class ToolError(ToolvisorError):
    """Whatever went wrong *inside* a call, normalised to one of six reasons.

    ``cause`` is the exception, exit code, signal or offending value. A ``ToolError`` is
    serialisable with :meth:`to_dict` / :meth:`from_dict`; after a round trip ``cause`` is a
    plain JSON value (an exception becomes ``{"type", "message"}``).
    """

    reason: ToolErrorReason
    message: str
    tool_name: str | None
    tool_call_id: str | None
    cause: Any
    code: str | None
    metadata: dict[str, Any]

    def __init__(
        self,
        reason: ToolErrorReason,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        cause: Any = None,
        code: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if reason not in TOOL_ERROR_REASONS:
            raise ValueError(
                f"unknown ToolError reason {reason!r}; expected one of "
                f"{sorted(TOOL_ERROR_REASONS)}"
            )
        if message is None:
            message = (
                f"tool error ({tool_name}): {reason}" if tool_name else f"tool error: {reason}"
            )
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.cause = cause
        self.code = code
        self.metadata = dict(metadata or {})

    def __repr__(self) -> str:
        return f"ToolError(reason={self.reason!r}, message={self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolError):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = Exception.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps the keyword-only fields across pickling (worker processes send these back).
        return (_rebuild_tool_error, (self.to_dict(keep_cause=True),))

    def to_dict(self, *, keep_cause: bool = False) -> dict[str, Any]:
        """A plain dict; JSON-safe unless ``keep_cause`` keeps the raw ``cause``."""
        return {
            "reason": self.reason,
            "message": self.message,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "cause": self.cause if keep_cause else _plain(self.cause),
            "code": self.code,
            "metadata": self.metadata if keep_cause else _plain(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolError:
        """Rebuild from :meth:`to_dict` output; an unknown reason or field is a ``ValueError``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"ToolError.from_dict needs a mapping, got {type(data).__name__}")
        unknown = set(data) - _TOOL_ERROR_FIELDS
        if unknown:
            raise ValueError(f"ToolError.from_dict: unknown field(s) {sorted(unknown)}")
        if "reason" not in data:
            raise ValueError("ToolError.from_dict: missing field 'reason'")
        return cls(
            data["reason"],
            data.get("message"),
            tool_name=data.get("tool_name"),
            tool_call_id=data.get("tool_call_id"),
            cause=data.get("cause"),
            code=data.get("code"),
            metadata=data.get("metadata"),
        )

    def for_model(self) -> dict[str, Any]:
        """What the model is shown: reason, message and code, never a traceback."""
        out: dict[str, Any] = {"reason": self.reason, "message": self.message}
        if self.code:
            out["code"] = self.code
        if isinstance(self.cause, BaseException):
            out["detail"] = f"{type(self.cause).__name__}: {self.cause}"
        return out


_TOOL_ERROR_FIELDS = frozenset(
    {"reason", "message", "tool_name", "tool_call_id", "cause", "code", "metadata"}
)


def _rebuild_tool_error(data: dict[str, Any]) -> ToolError:
    return ToolError.from_dict(data)


@dataclass(frozen=True, slots=True)
class Violation:
    """One way the arguments broke the tool's schema; ``path`` is a JSON path like ``$.a[0]``."""

    path: str
    message: str
    validator: str


class InvalidArguments(ToolvisorError):
    """The model's arguments failed the tool's JSON schema; the handler never ran.

    Comes back as ``Err(InvalidArguments(...))`` listing every violation, so the model can fix
    all of them in one go.
    """

    def __init__(self, tool_name: str, violations: Sequence[Violation]) -> None:
        self.tool_name = tool_name
        self.violations = tuple(violations)
        lines = "; ".join(f"{v.path}: {v.message}" for v in self.violations)
        super().__init__(f"invalid arguments for tool {tool_name!r}: {lines}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InvalidArguments):
            return NotImplemented
        return (self.tool_name, self.violations) == (other.tool_name, other.violations)

    __hash__ = Exception.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return (InvalidArguments, (self.tool_name, self.violations))

    def for_model(self) -> dict[str, Any]:
        """The violations as the model is shown them."""
        return {
            "reason": "invalid_arguments",
            "message": str(self),
            "violations": [
                {"path": v.path, "message": v.message, "validator": v.validator}
                for v in self.violations
            ],
        }


class InvalidHandlerError(ToolvisorError, TypeError):
    """A handler that breaks the arity rule (``contract/_arity.py``), or that could never return
    a handler result (annotated ``-> dict``, say): refused when the Tool is built."""


class OpenSchemaWarning(ToolvisorError, UserWarning):
    """Warned when ``@tool`` builds a tool whose handler takes its arguments as a bare ``dict``
    (or ``Any``, or unannotated) with no ``input_schema``: the model is told only
    ``{"type": "object"}``, no field names and no types; and when ``@function_tool`` builds one
    with a parameter not annotated (or ``Any``): the model is told nothing of its type (an
    empty schema). Filter it by this class."""


class UndescribedToolWarning(ToolvisorError, UserWarning):
    """Warned when ``@function_tool`` builds a tool with no description (no docstring, no
    ``description=``): the model is told its name and parameters, never what it is for. Filter
    it by this class."""


class CapabilityError(ToolvisorError):
    """A capability of the call context is missing or refused; ``code`` says which, stably.

    ``completion_keys_unavailable`` / ``durable_effects_unavailable``: the run has no session
    store; give the agent one (``Agent(..., store=path)``). ``toolvisor.durable.DurableError``
    is a subclass with more codes.
    """

    code: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles with its own arguments (and attributes), so it crosses to and from a worker
        process intact."""
        return type(self), (self.code, self.message), self.__dict__
