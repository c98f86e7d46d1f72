"""How a run ends (``Completed``, ``Halted``, ``Failed``) and what it waits for: plain JSON data.

``Suspended`` carries a checkpoint, so it lives next to ``Checkpoint`` in ``_checkpoint``.

Results and errors in outcomes are JSON values (converted when they arrive), so an outcome
rebuilt from a checkpoint equals the one the original run produced.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolvisor.contract import FinishReason, Message, ModelErrorReason, OnCancel, OnTimeout, Usage


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


QUESTION_EXPIRED_CODE = "question_expired"
"""The ``ToolError`` code of a question denied because it expired unanswered."""


class Question(_Frozen):
    """A call that returned ``AskUser``: the answer given to ``resume`` becomes its result.

    ``expires_in`` and ``default`` are the ``AskUser``'s; ``expires_at`` is its deadline on the
    host's clock (the store's, with a store), set once when the run first suspends on it.
    """

    call_id: str
    tool: str
    question: str
    options: tuple[str, ...] | None = None
    expires_in: float | None = None
    default: str | None = None
    expires_at: float | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Question:
        if self.options is not None and self.default is not None \
                and self.default not in self.options:
            raise ValueError(f"question {self.call_id!r}: default {self.default!r} is not one "
                             f"of its options {list(self.options)}")
        if self.expires_in is None and (self.expires_at is not None or self.default is not None):
            raise ValueError(f"question {self.call_id!r}: a deadline or a default without "
                             "expires_in")
        return self

    def refusal(self, answer: Any) -> str | None:
        """Why ``answer`` (a plain value, or the value of an ``Ok``) cannot answer this
        question: it is not one of the options. ``None`` when it can."""
        if self.options is None or (isinstance(answer, str) and answer in self.options):
            return None
        return (f"the answer {answer!r} to call {self.call_id!r} ({self.question!r}) is not "
                f"one of its options {list(self.options)}")


class ManualCall(_Frozen):
    """A call of a ``manual=True`` tool, for the caller to run: its arguments passed the
    tool's schema, and the result given to ``resume`` becomes the call's result."""

    call_id: str
    tool: str
    arguments: dict[str, Any]


class PendingCall(_Frozen):
    """A call that returned ``Pending``: the host resolves it later with a result.

    ``turn`` and ``attempt`` are those of the ``CallToRun`` that returned it.
    """

    call_id: str
    tool: str
    turn: int
    attempt: int
    deadline: float | None = None
    on_timeout: OnTimeout = "error_as_result"
    on_cancel: OnCancel = "ignore"


class StateConflict(_Frozen):
    """Two calls of one parallel step wrote ``key``: the first in call order kept it."""

    key: str
    kept_call_id: str
    dropped_call_id: str
    turn: int


class Completed(_Frozen):
    """The model answered without asking for tools: ``text`` is its final answer.

    ``finish_reason`` is that answer's (``length``: the text was cut off at the token limit);
    ``usage`` sums every model call of the run, as in each outcome.
    """

    kind: Literal["completed"] = "completed"
    text: str | None
    messages: tuple[Message, ...]
    turns: int
    state: dict[str, Any] = Field(default_factory=dict)
    state_conflicts: tuple[StateConflict, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage = Field(default_factory=Usage)


class Halted(_Frozen):
    """The run stopped early: a handler's ``Halt``, ``tool_error``, ``max_turns``, ...

    ``messages`` gives every tool call a result (calls that never ran say so).
    """

    kind: Literal["halted"] = "halted"
    reason: str
    result: Any = None
    messages: tuple[Message, ...]
    turns: int
    state: dict[str, Any] = Field(default_factory=dict)
    state_conflicts: tuple[StateConflict, ...] = ()
    usage: Usage = Field(default_factory=Usage)


class ModelFailure(_Frozen):
    """Why the model call that failed a run failed: the last ``ModelError`` as JSON data.

    ``attempts`` is how many times that turn's model call was tried; ``cause`` the error's
    cause as JSON (an exception becomes ``{"type", "message"}``); ``policy`` the reason a
    policy function failed, if it did.
    """

    reason: ModelErrorReason
    message: str
    attempts: int
    retry_after: float | None = None
    status: int | None = None
    cause: Any = None
    policy: str | None = None


class Failed(_Frozen):
    """The run could not go on: the model call or the host failed (``error`` says how).

    ``model_error`` says why, when the model failed; ``messages`` keeps the transcript and
    every tool result gathered, so a durable run can be tried again (``Agent.resume_run``).
    """

    kind: Literal["failed"] = "failed"
    error: str
    model_error: ModelFailure | None = None
    messages: tuple[Message, ...]
    turns: int
    state: dict[str, Any] = Field(default_factory=dict)
    state_conflicts: tuple[StateConflict, ...] = ()
    usage: Usage = Field(default_factory=Usage)


FinalOutcome = Completed | Halted | Failed

RunStatus = Literal["running", "suspended", "completed", "halted", "failed", "cancelled"]
"""Where a run stands (``TurnMachine.status``): ``cancelled`` is a ``Halted`` run that was
cancelled; ``completed``, ``halted`` and ``failed`` are the other endings."""
