"""A ``TurnMachine``'s state as versioned JSON data, the checks a restore makes, and ``Suspended``.

The machine keeps its state in a ``RunState`` (owned by the machine, mutated only by it); a
``Checkpoint`` is a deep copy of it. Live error objects are never stored: a call keeps the text
the model will read and, when it halts the run, a JSON form of the reason.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, NoReturn

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializationInfo,
    SerializeAsAny,
    TypeAdapter,
    ValidationError,
    computed_field,
    field_validator,
    model_validator,
)

from toolvisor.contract import FrozenModel, Message, ToolCall, ToolSpec, ToolvisorError, Usage
from toolvisor.machine._effects import EffectId, Sleep, ToolCalls
from toolvisor.machine._outcomes import (
    Completed,
    Failed,
    Halted,
    ManualCall,
    PendingCall,
    Question,
    RunNotCompletedError,
    RunStatus,
    StateConflict,
    waiting_for,
)
from toolvisor.machine._upgrade import upgrade

CHECKPOINT_VERSION: Literal[4] = 4
"""2: ``CallToRun`` and ``PendingCall`` carry the turn (and ``PendingCall`` the attempt); a
model call its attempt; a run that failed on its model, the model error. 3: tool calls keep the
model's raw arguments text, runs and outcomes their token usage, ``Completed`` the finish
reason. 4: a tool call's retry is a call of a ``ToolCalls`` effect with its own ``backoff``,
never a ``Sleep`` (which is only the model's); later in 4, a run's own catalog edits
(``membership``), written only when it has some, so a run that never edits its catalog writes
what earlier toolvisors read. Older versions read as 4 (``_upgrade``)."""

_READABLE_VERSIONS = (2, 3, CHECKPOINT_VERSION)

Mode = Literal["sequential", "parallel_batch_approval", "parallel_streaming"]
Phase = Literal["new", "awaiting_model", "awaiting_tools", "sleeping", "between", "suspended",
                "done"]
CallStatus = Literal["queued", "running", "retry_wait", "suspended", "done"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class HaltRecord(_Record):
    """A call's request to end the run: its reason and JSON result."""

    reason: str
    result: Any = None


@dataclass(slots=True, kw_only=True)
class CallRecord:
    """One tool call of the current batch and where it is.

    ``text`` is the result the model will read (for ``retry_wait``, the last error, used if
    the run halts before the retry; ``retry_delay`` is its backoff until the retry is listed
    in a ``ToolCalls`` effect, in the same machine step unless a sibling halts the run).
    ``writes`` are the state writes of its last attempt, applied when its step settles.
    ``notes`` are appended to ``text`` (state conflicts).

    A slots dataclass, not a model: the machine builds one per call and sets its fields as
    the call goes, so it costs one object the collector tracks instead of three, and plain
    attribute writes; pydantic still validates and writes it inside a checkpoint.
    """

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    call: ToolCall
    step: int
    known: bool
    retryable: bool
    status: CallStatus = "queued"
    attempt: int = 1
    text: str | None = None
    is_error: bool = False
    question: Question | None = None
    manual: ManualCall | None = None
    pending: PendingCall | None = None
    writes: dict[str, Any] = field(default_factory=dict)
    halt: HaltRecord | None = None
    retry_delay: float | None = None
    notes: tuple[str, ...] = ()  # none (most calls): no list of its own for the collector


@dataclass(slots=True, kw_only=True)
class StepRecord:
    """Calls run together in one step; ``snapshot`` is the state they read (set when started).

    A ``manual`` step, always a batch's last, holds the calls the caller runs: they are never
    emitted, only checked and suspended."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    calls: list[int]
    snapshot: dict[str, Any] | None = None
    committed: bool = False
    manual: bool = False


@dataclass(slots=True, kw_only=True)
class ModelCallRecord:
    """The outstanding ``LlmCall`` without its messages: while the machine awaits the model the
    conversation cannot change, so the request is ``run.messages`` plus these ``tools``. Keeping
    the conversation once halves a checkpoint of a long run. A slots dataclass, as the records
    above."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    kind: Literal["llm_call"] = "llm_call"
    id: EffectId
    turn: int
    tools: tuple[ToolSpec, ...]
    attempt: int = 1

    def __deepcopy__(self, memo: dict[int, Any]) -> ModelCallRecord:
        """Field by field: quicker than ``deepcopy``'s generic path for a slots dataclass."""
        return ModelCallRecord(id=self.id, turn=self.turn, tools=copy.deepcopy(self.tools, memo),
                               attempt=self.attempt)


_NO_USAGE = Usage()


def _final_without_run_id(final: Completed | Halted | Failed | None,
                          info: SerializationInfo) -> Any:
    """The run id is the host's (it stamps the outcomes it returns), never the machine's
    state: a checkpoint keeps the shape older versions of toolvisor read."""
    return None if final is None else final.model_dump(mode=info.mode, exclude={"run_id"})


def _empty(value: dict[str, bool]) -> bool:
    return not value


@dataclass(slots=True, kw_only=True)
class RunState:
    """Everything a ``TurnMachine`` knows; a checkpoint is a deep copy of it.

    A slots dataclass (pydantic validates and writes it inside a ``Checkpoint``): the machine
    sets its fields dozens of times a run, a plain attribute write each."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    phase: Phase = "new"
    mode: Mode
    seed: int
    next_effect_id: EffectId = 1
    turns: int = 0
    model_attempt: int = 1  # the attempt of this turn's model call, asked or to be asked
    # Each message is written by its own class's serializer (every message in a run is of
    # exactly one of Message's classes: subclasses are revalidated into them), not tried
    # through the union's, which took twice as long to write a long run's messages.
    messages: list[SerializeAsAny[Message]] = field(default_factory=list)
    usage: Usage = _NO_USAGE  # summed over the run's model calls (frozen: shared while zero)
    state: dict[str, Any] = field(default_factory=dict)
    conflicts: list[StateConflict] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    cursor: int = 0
    outstanding: Annotated[ModelCallRecord | ToolCalls | Sleep | None,
                           Field(discriminator="kind")] = None
    done_effect_id: EffectId | None = None
    final: Annotated[Completed | Halted | Failed | None, Field(discriminator="kind"),
                     PlainSerializer(_final_without_run_id)] = None
    # The run's own catalog edits (tool name -> present) over the agent's, as its calls made
    # them through ctx.sessions.set_tool_membership; left out of the JSON while empty.
    membership: Annotated[dict[str, bool], Field(exclude_if=_empty)] = field(
        default_factory=dict)


class CheckpointError(ToolvisorError, ValueError):
    """A checkpoint that cannot be restored: unknown version, tampered shape, inconsistent."""


class Checkpoint(FrozenModel):
    """A ``TurnMachine`` frozen at one point: ``to_json()`` and ``from_json()`` round-trip it.

    Restore it with ``TurnMachine.restore(config, checkpoint)``. The configuration (tools,
    policies) is not in it: handlers and policy functions are code, not data.
    """

    version: Literal[4] = CHECKPOINT_VERSION
    run: RunState

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        version = data.get("version", CHECKPOINT_VERSION)
        if version not in _READABLE_VERSIONS:
            raise CheckpointError(
                f"checkpoint version {version!r} is not supported: this toolvisor reads "
                f"versions {list(_READABLE_VERSIONS)}; restore it with the toolvisor that wrote it"
            )
        return {**upgrade(data, version), "version": CHECKPOINT_VERSION}

    def to_json(self) -> str:
        """The checkpoint as JSON text."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint:
        """Parse JSON text from :meth:`to_json`; anything else is a :class:`CheckpointError`.

        Text of the current version is validated straight from JSON (``_Current``); only what
        that refuses (an older version, or not a checkpoint) goes through the version check and
        the upgrade, which need the data as Python objects first."""
        try:
            return cls.model_construct(version=CHECKPOINT_VERSION,
                                       run=_Current.model_validate_json(text).run)
        except ValidationError:
            pass  # an older version, or no checkpoint: the full validation upgrades or says why
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise CheckpointError(_explain(exc)) from exc

    @classmethod
    def from_data(cls, data: Any) -> Checkpoint:
        """Validate plain JSON data (a dict); anything else is a :class:`CheckpointError`."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise CheckpointError(_explain(exc)) from exc


class _Current(FrozenModel):
    """A checkpoint of the current version, and nothing else: pydantic validates it straight
    from JSON text, where ``Checkpoint``'s version check (a ``before`` validator) would first
    turn the whole text into Python objects (a quarter of a restore's time)."""

    version: Literal[4] = CHECKPOINT_VERSION
    run: RunState


def _explain(exc: ValidationError) -> str:
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, CheckpointError):
            return str(cause)
    lines = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or '$'}: {e['msg']}" for e in exc.errors()[:5]
    )
    return f"not a valid toolvisor checkpoint (tampered or from another program): {lines}"


_DERIVED = ("questions", "manual", "pending")


def waiting_calls(run: RunState) -> dict[str, tuple[int, int]]:
    """The calls the run waits on, by id, each with its ``(turn, attempt)``: which call of
    which turn a ``Suspended`` asked about, so a host can tell one that is spent."""
    return {r.call.id: (run.turns, r.attempt) for r in run.calls if r.status == "suspended"}


class Suspended(FrozenModel):
    """The run waits for answers (``questions``), the caller's results of ``manual`` tools
    (each call with its arguments), or deferred results (``pending``).

    ``checkpoint`` is everything needed to go on: ``TurnMachine.restore(config, checkpoint)``
    then ``resume({call_id: answer, ...})``, in this process or another one. ``questions``,
    ``manual`` and ``pending`` are read from the checkpoint, never stored beside it: what a
    human is shown is what the run asked (data given for them must match it, or it is
    refused as altered). An ``Agent`` sets ``run_id`` (with a run store, the run's id in
    the store; a bare ``TurnMachine`` leaves it empty) and, with a store, ``keys`` (the
    completion key each pending call waits on, by call id). An ``Agent`` signs what it gives
    out (``signature``, over ``signed_text()``) and resumes only what verifies, once.
    ``model_dump_json()`` is the whole of it; ``repr`` only says what it waits for. It reads
    as the other outcomes do (``status``, ``usage``, ``messages``, ``turns``, ``state``); its
    ``text`` raises ``RunNotCompletedError`` saying what it waits for.
    """

    kind: Literal["suspended"] = "suspended"
    checkpoint: Checkpoint
    run_id: str = ""
    keys: dict[str, str] = Field(default_factory=dict)
    signature: str | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _derived_match(cls, data: Any, handler: Any) -> Any:
        """Data that names ``questions``, ``manual`` or ``pending`` (a dump does) must say
        what the checkpoint says; anything else was altered."""
        given = {}
        if isinstance(data, dict):
            given = {name: data[name] for name in _DERIVED if name in data}
            data = {k: v for k, v in data.items() if k not in _DERIVED}
        suspended = handler(data)
        for name, value in given.items():
            derived = getattr(suspended, name)
            if _ADAPTERS[name].validate_python(value) != derived:
                raise ValueError(f"Suspended.{name} does not match its checkpoint: it was "
                                 "altered; what a human is shown comes from the signed "
                                 "checkpoint")
        return suspended

    def _waiting(self) -> list[CallRecord]:
        return [r for r in self.checkpoint.run.calls if r.status == "suspended"]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def questions(self) -> tuple[Question, ...]:
        """The questions asked (``AskUser``), in call order."""
        return tuple(r.question for r in self._waiting() if r.question is not None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def manual(self) -> tuple[ManualCall, ...]:
        """The calls of ``manual=True`` tools, for the caller to run, in call order."""
        return tuple(r.manual for r in self._waiting() if r.manual is not None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """The calls that returned ``Pending``, in call order."""
        return tuple(r.pending for r in self._waiting() if r.pending is not None)

    @property
    def expires_at(self) -> float | None:
        """The earliest deadline of its questions (host clock), or ``None``."""
        deadlines = [q.expires_at for q in self.questions if q.expires_at is not None]
        return min(deadlines) if deadlines else None

    @field_validator("run_id", mode="before")
    @classmethod
    def _no_run_id(cls, value: Any) -> Any:
        """A ``Suspended`` stored by an earlier version may say ``null``: no run id."""
        return "" if value is None else value

    def signed_text(self) -> str:
        """What the signature covers: the run id, the keys and the whole checkpoint (which is
        where the questions, manual calls and pending calls are read from)."""
        return (f"suspended\n{self.run_id or ''}\n"
                f"{json.dumps(self.keys, sort_keys=True)}\n{self.checkpoint.to_json()}")

    def waiting_calls(self) -> dict[str, tuple[int, int]]:
        """The calls it waits on, by id, each with its ``(turn, attempt)``."""
        return waiting_calls(self.checkpoint.run)

    @property
    def usage(self) -> Usage:
        """The tokens the run's model calls used so far."""
        return self.checkpoint.run.usage

    @property
    def status(self) -> RunStatus:
        """``suspended``."""
        return "suspended"

    @property
    def text(self) -> NoReturn:
        """A suspended run has no final answer yet: raises ``RunNotCompletedError`` saying
        what it waits for and how to go on."""
        raise RunNotCompletedError(self, "is suspended, so it has no text yet: " + waiting_for(
            self.questions, self.manual, self.pending))

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation so far (the waiting calls have no result in it yet)."""
        return tuple(self.checkpoint.run.messages)

    @property
    def turns(self) -> int:
        """How many model calls the run asked for so far."""
        return self.checkpoint.run.turns

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the run's committed state."""
        return copy.deepcopy(self.checkpoint.run.state)

    @property
    def call_ids(self) -> tuple[str, ...]:
        """The ids of every call waiting for an answer or a result, in call order."""
        return tuple(r.call.id for r in self._waiting()
                     if r.question is not None or r.manual is not None or r.pending is not None)

    def __repr__(self) -> str:
        parts = [f"run_id={self.run_id!r}"]
        if self.questions:
            parts.append("questions=[" + ", ".join(_short(q) for q in self.questions) + "]")
        if self.manual:
            parts.append(f"manual={[m.call_id for m in self.manual]}")
        if self.pending:
            parts.append(f"pending={[p.call_id for p in self.pending]}")
        if self.keys:  # the call ids only: a key resolves its call, it is not for logs
            parts.append(f"keys={sorted(self.keys)}")
        if self.expires_at is not None:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.expires_at))
            parts.append(f"expires_at={round(self.expires_at, 3)} ({when})")
        return f"Suspended({', '.join(parts)})"

    __str__ = __repr__


def _short(question: Question) -> str:
    text = question.question if len(question.question) <= 60 else question.question[:59] + "…"
    options = "" if question.options is None else f" {list(question.options)}"
    return f"{question.call_id}: {text!r}{options}"


_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "questions": TypeAdapter(tuple[Question, ...]),
    "manual": TypeAdapter(tuple[ManualCall, ...]),
    "pending": TypeAdapter(tuple[PendingCall, ...]),
}


_PHASE_EFFECT: dict[str, type | None] = {
    "new": None, "awaiting_model": ModelCallRecord, "awaiting_tools": ToolCalls, "sleeping": Sleep,
    "suspended": None, "done": None,
}


def check_restorable(run: RunState, mode: Mode) -> None:
    """Refuse a checkpoint whose parts contradict each other (tampered or hand-made)."""
    def bad(detail: str) -> CheckpointError:
        return CheckpointError(f"inconsistent checkpoint: {detail}")

    if run.mode != mode:
        raise bad(f"it was taken in mode {run.mode!r} and cannot be restored in mode "
                  f"{mode!r}")
    if run.phase not in _PHASE_EFFECT:
        raise bad(f"phase {run.phase!r} is never checkpointed")
    expected = _PHASE_EFFECT[run.phase]
    effect = run.outstanding
    if (expected is None) != (effect is None) or (
            expected is not None and not isinstance(effect, expected)):
        raise bad(f"phase {run.phase!r} does not go with outstanding effect "
                  f"{type(effect).__name__}")
    if effect is not None and effect.id >= run.next_effect_id:
        raise bad(f"outstanding effect {effect.id} was never emitted")
    if (run.phase in ("suspended", "done")) != (run.done_effect_id is not None) or (
            run.done_effect_id is not None and run.done_effect_id >= run.next_effect_id):
        raise bad("the Done effect id does not match the phase")
    if (run.phase == "done") != (run.final is not None):
        raise bad("a final outcome exists only when the run is done")
    if run.phase == "suspended" and not any(r.status == "suspended" for r in run.calls):
        raise bad("a suspended run needs a suspended call")
    running = {r.call.id for r in run.calls if r.status == "running"}
    listed = {c.call.id for c in effect.calls} if isinstance(effect, ToolCalls) else set()
    if not running <= listed:
        raise bad(f"calls {sorted(running - listed)} are running outside the outstanding effect")
    if isinstance(effect, ToolCalls) and not running:
        raise bad("the outstanding ToolCalls effect has no running call")
    if any(r.status == "queued" and r.call.id in listed for r in run.calls):
        raise bad("a call of the outstanding ToolCalls effect is queued, not running")
    if isinstance(effect, ToolCalls) and any(c.turn != run.turns for c in effect.calls):
        raise bad(f"the outstanding ToolCalls effect has calls of another turn than {run.turns}")
    if isinstance(effect, ToolCalls) and any(c.backoff is not None and c.backoff.since > effect.id
                                             for c in effect.calls):
        raise bad(f"a retry's backoff counts from an effect after {effect.id}, the effect that "
                  "lists it")
    if any(r.pending is not None and (r.pending.call_id, r.pending.turn, r.pending.attempt)
           != (r.call.id, run.turns, r.attempt) for r in run.calls):
        raise bad("a pending call's id, turn or attempt does not match its call")
    indices = [i for step in run.steps for i in step.calls]
    if any(not 0 <= i < len(run.calls) for i in indices) or len(set(indices)) != len(indices) \
            or run.cursor > len(run.steps):
        raise bad("the step plan does not match the calls")
