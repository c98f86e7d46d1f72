"""How a run ends (``Completed``, ``Halted``, ``Failed``) and what it waits for: plain JSON data.

``Suspended`` carries a checkpoint, so it lives next to ``Checkpoint`` in ``_checkpoint``.

Results and errors in outcomes are JSON values (converted when they arrive), so an outcome
rebuilt from a checkpoint equals the one the original run produced. Every outcome reads the
same way: ``run_id``, ``status``, ``usage``, ``messages``, ``turns``, ``state``, and ``text``:
a ``Completed`` run's final answer; on any other outcome reading it raises
``RunNotCompletedError``, whose message says why there is none. Raising, not returning
``None``, is the point: a run that failed must say so where ``.text`` is read, and an error that
is no ``AttributeError`` cannot be hidden by ``getattr(outcome, "text", None)``.

``run_id`` is the host's, not the machine's: an ``Agent`` sets it on every outcome it returns
(with a store, the id the store keeps the run under, which ``resume_run`` and ``python -m
toolvisor.cli runs`` know it by); a bare ``TurnMachine``, which knows no run id, leaves it
empty, and a checkpoint never holds it.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NoReturn

from pydantic import Field, model_validator

from toolvisor.contract import (
    FinishReason,
    FrozenModel,
    Message,
    ModelErrorReason,
    OnCancel,
    OnTimeout,
    ToolvisorError,
    Usage,
)

RunStatus = Literal["running", "suspended", "completed", "halted", "failed", "cancelled"]
"""Where a run stands (``TurnMachine.status``, an outcome's ``status``): ``cancelled`` is a
``Halted`` run that was cancelled; ``completed``, ``halted`` and ``failed`` are the other
endings."""

_SHOWN = 300  # characters of a halt's result a RunNotCompletedError message shows


class RunNotCompletedError(ToolvisorError, RuntimeError):
    """``text`` was read on an outcome that is not ``Completed``: the run failed, halted, was
    cancelled or is suspended, so it has no final answer.

    The message names the run, how it stands and why (the model's error, the halt's reason,
    what the run waits for); ``outcome`` is the outcome itself, to read the rest from.
    """

    def __init__(self, outcome: Any, standing: str) -> None:
        run = f"run {outcome.run_id}" if outcome.run_id else "the run"
        super().__init__(f"{run} {standing}")
        self.outcome = outcome
        self.standing = standing

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.outcome, self.standing)


QUESTION_EXPIRED_CODE = "question_expired"
"""The ``ToolError`` code of a question denied because it expired unanswered."""


class Question(FrozenModel):
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


class ManualCall(FrozenModel):
    """A call of a ``manual=True`` tool, for the caller to run: its arguments passed the
    tool's schema, and the result given to ``resume`` becomes the call's result."""

    call_id: str
    tool: str
    arguments: dict[str, Any]


class PendingCall(FrozenModel):
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


class StateConflict(FrozenModel):
    """Two calls of one parallel step wrote ``key``: the first in call order kept it."""

    key: str
    kept_call_id: str
    dropped_call_id: str
    turn: int


class Completed(FrozenModel):
    """The model answered without asking for tools: ``text`` is its final answer.

    ``finish_reason`` is that answer's (``length``: the text was cut off at the token limit);
    ``usage`` sums every model call of the run, as in each outcome.
    """

    kind: Literal["completed"] = "completed"
    run_id: str = ""
    text: str | None
    messages: tuple[Message, ...]
    turns: int
    state: dict[str, Any] = Field(default_factory=dict)
    state_conflicts: tuple[StateConflict, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage = Field(default_factory=Usage)

    @property
    def status(self) -> RunStatus:
        """``completed``."""
        return "completed"


class Halted(FrozenModel):
    """The run stopped early: a handler's ``Halt``, ``tool_error``, ``max_turns``, ...

    ``messages`` gives every tool call a result (calls that never ran say so). A cancelled
    run is ``Halted(reason="cancelled")``, whose ``status`` is ``cancelled``.
    """

    kind: Literal["halted"] = "halted"
    run_id: str = ""
    reason: str
    result: Any = None
    messages: tuple[Message, ...]
    turns: int
    state: dict[str, Any] = Field(default_factory=dict)
    state_conflicts: tuple[StateConflict, ...] = ()
    usage: Usage = Field(default_factory=Usage)

    @property
    def status(self) -> RunStatus:
        """``cancelled`` for a cancelled run, else ``halted``."""
        return "cancelled" if self.reason == "cancelled" else "halted"

    @property
    def text(self) -> NoReturn:
        """A halted run has no final answer: raises ``RunNotCompletedError`` with the reason."""
        if self.status == "cancelled":
            raise RunNotCompletedError(self, "was cancelled, so it has no text")
        raise RunNotCompletedError(
            self, f"halted ({self.reason}) after {self.turns} turn"
                  f"{'s' if self.turns != 1 else ''}, so it has no text: {_halt_detail(self)}")


class ModelErrorInfo(FrozenModel):
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


class Failed(FrozenModel):
    """The run could not go on: the model call or the host failed (``error`` says how).

    ``model_error`` says why, when the model failed; ``messages`` keeps the transcript and
    every tool result gathered, so a durable run can be tried again (``Agent.resume_run``).
    """

    kind: Literal["failed"] = "failed"
    run_id: str = ""
    error: str
    model_error: ModelErrorInfo | None = None
    messages: tuple[Message, ...]
    turns: int
    state: dict[str, Any] = Field(default_factory=dict)
    state_conflicts: tuple[StateConflict, ...] = ()
    usage: Usage = Field(default_factory=Usage)

    @property
    def status(self) -> RunStatus:
        """``failed``."""
        return "failed"

    @property
    def text(self) -> NoReturn:
        """A failed run has no final answer: raises ``RunNotCompletedError`` with ``error``
        (for a model failure, the provider's message, e.g. ``HTTP 401: ...``)."""
        raise RunNotCompletedError(self, f"failed, so it has no text: {self.error}")


FinalOutcome = Completed | Halted | Failed


def _halt_detail(halted: Halted) -> str:
    """What a halt carried, in a line: the failed call's error, the policy's complaint, or
    the handler's result as JSON (cut to a few hundred characters)."""
    if halted.reason == "max_turns":
        return ("the model still asked for tools at its last turn "
                "(raise Agent(limits=Limits(turns=...))?)")
    result = halted.result
    if isinstance(result, dict) and isinstance(result.get("tool_call_id"), str):
        error = result.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return f"{error['message']} (call {result['tool_call_id']})"
        if isinstance(result.get("detail"), str):
            return f"{result['detail']} (call {result['tool_call_id']})"
    if result is None:
        return "it carried no result"
    shown = json.dumps(result, ensure_ascii=False, default=repr)
    if len(shown) > _SHOWN:
        shown = shown[:_SHOWN] + f"... ({len(shown) - _SHOWN} more characters)"
    return f"its result is {shown}"


def waiting_for(questions: tuple[Question, ...], manual: tuple[ManualCall, ...],
                pending: tuple[PendingCall, ...]) -> str:
    """What a suspended run waits for and how to go on, in a sentence (for its error)."""
    parts = [f"an answer to call {q.call_id} ({q.tool}: {q.question!r})" for q in questions]
    parts += [f"the result of manual call {m.call_id} ({m.tool})" for m in manual]
    parts += [f"the completion key of call {p.call_id} ({p.tool})" for p in pending]
    how = []
    if questions or manual:
        how.append("agent.resume(outcome, answer) continues it")
    if pending:
        how.append("agent.resolve(key, ok=...) delivers a key's result and "
                   "agent.resume_run(run_id) waits for the run")
    return f"it waits for {', '.join(parts)}; {'; '.join(how)}"
