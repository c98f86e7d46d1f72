"""The handler results: what a handler chose to say, passed through untouched.

These are frozen, slotted dataclasses so they are cheap to build, immutable once
returned, and usable in ``match`` statements (``case Ok(value): ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from toolvisor.contract._seconds import check_seconds

OnTimeout: TypeAlias = Literal["error_as_result", "fail_turn"]
OnCancel: TypeAlias = Literal["cancel_external_work", "ignore"]


@dataclass(frozen=True, slots=True)
class Ok:
    """The call succeeded; ``value`` is what the model will see, once encoded."""

    value: Any = None


@dataclass(frozen=True, slots=True)
class Err:
    """The handler reported a failure it chose to report (not a crash).

    ``reason`` is anything: a string, a dict, an exception. The runtime never wraps it,
    so a policy can tell a reported error from a ``ToolError``.
    """

    reason: Any


@dataclass(frozen=True, slots=True)
class AskUser:
    """Suspend the run and ask the user; the answer becomes this call's result.

    With ``options`` (each given once) the answer must be one of them (a free answer
    otherwise). With ``expires_in`` (seconds from when the run suspends on the question) the
    question expires: after its deadline it is answered by ``default``, one of the options, or,
    with no ``default``, denied (``Err(ToolError("timeout", code="question_expired"))``, which goes
    through ``on_tool_error`` like any failure); a late answer is never applied.
    """

    question: str
    options: tuple[str, ...] | None = None
    expires_in: float | None = None
    default: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise TypeError(f"AskUser.question must be a str, got {type(self.question).__name__}")
        if self.options is not None:
            if isinstance(self.options, str) or not all(isinstance(o, str) for o in self.options):
                raise TypeError("AskUser.options must be a sequence of str or None")
            object.__setattr__(self, "options", tuple(self.options))
            if not self.options:
                raise ValueError("AskUser.options is empty: no answer could be given; pass None "
                                 "for a free answer")
            repeated = sorted({o for o in self.options if self.options.count(o) > 1})
            if repeated:
                raise ValueError(f"AskUser.options repeats {repeated}: each option is an answer "
                                 "the user picks, so give each one once")
        check_seconds("AskUser.expires_in", self.expires_in, positive=True, optional=True)
        if self.default is not None:
            if self.expires_in is None:
                raise ValueError("AskUser.default is the answer given when the question expires; "
                                 "give expires_in too")
            if not isinstance(self.default, str):
                raise TypeError(f"AskUser.default must be a str or None (deny), got "
                                f"{type(self.default).__name__}")
            if self.options is not None and self.default not in self.options:
                raise ValueError(f"AskUser.default {self.default!r} is not one of the options "
                                 f"{list(self.options)}")


@dataclass(frozen=True, slots=True)
class Halt:
    """End the whole run with ``reason``; ``result`` is the run's final result."""

    reason: str
    result: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason:
            raise TypeError("Halt.reason must be a non-empty str")


@dataclass(frozen=True, slots=True)
class Pending:
    """The call's result will arrive later, through the completion key it took.

    ``deadline`` is in seconds from when the runtime parks the call (``None``: no deadline).
    """

    deadline: float | None = None
    on_timeout: OnTimeout = "error_as_result"
    on_cancel: OnCancel = "ignore"

    def __post_init__(self) -> None:
        check_seconds("Pending.deadline", self.deadline, positive=True, optional=True)
        if self.on_timeout not in ("error_as_result", "fail_turn"):
            raise ValueError(f"Pending.on_timeout must be 'error_as_result' or 'fail_turn', "
                             f"got {self.on_timeout!r}")
        if self.on_cancel not in ("cancel_external_work", "ignore"):
            raise ValueError(f"Pending.on_cancel must be 'cancel_external_work' or 'ignore', "
                             f"got {self.on_cancel!r}")


HandlerResult: TypeAlias = Ok | Err | AskUser | Halt | Pending
"""Every value ``execute`` can return."""

LEGAL_RESULT_TYPES: tuple[type, ...] = (Ok, Err, AskUser, Halt, Pending)
