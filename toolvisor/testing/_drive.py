"""Driving a ``TurnMachine`` through a whole run, inline: scripted model, scripted tools.

No threads and no clock: tool handlers run in the calling thread through ``execute``; a model
backoff (``Sleep``) is answered at once and a tool retry runs as soon as it is listed, both
recorded in ``DriveResult.sleeps``. Good for testing policies, modes and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from toolvisor.call import encode_checked, execute
from toolvisor.contract import (
    AskUser,
    CallContext,
    Err,
    Halt,
    HandlerResult,
    Message,
    ModelError,
    ModelResponse,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolvisorError,
)
from toolvisor.machine import (
    CallOutcome,
    CallToRun,
    Done,
    Effect,
    LlmCall,
    MachineConfig,
    ManualCall,
    ModelReplied,
    NotPerformed,
    Outcome,
    PendingCall,
    Question,
    Sleep,
    Slept,
    StateView,
    Suspended,
    ToolCalls,
    ToolResults,
    TurnMachine,
)

ToolStep: TypeAlias = HandlerResult | Callable[..., Any]
"""A scripted tool outcome: a handler result, or a handler run inline with ``execute``."""

ToolScript: TypeAlias = ToolStep | Sequence[ToolStep]
"""One step for every run, or a list consumed one step per run (attempts, later turns)."""

Answers: TypeAlias = Mapping[str, Any] | Callable[[Question | ManualCall | PendingCall], Any]
Delivery: TypeAlias = Literal["together", "one_by_one", "reversed"]


class DriveScriptError(ToolvisorError, AssertionError):
    """The script does not cover the run: no model response or tool outcome left for a step."""


@dataclass
class DriveResult:
    """How a driven run ended, every effect it emitted in order, and the machine at the end."""

    outcome: Outcome
    trace: list[Effect]
    machine: TurnMachine

    @property
    def sleeps(self) -> list[float]:
        """The backoff delays the run asked for, in order: each model retry's ``Sleep`` and
        each tool retry's ``backoff`` (in the ``ToolCalls`` effect that first lists it)."""
        return [delay for e in self.trace for delay in _delays(e)]

    @property
    def tool_batches(self) -> list[list[str]]:
        """The call ids of every ``ToolCalls`` effect, in order (shows scheduling)."""
        return [[c.call.id for c in e.calls] for e in self.trace if isinstance(e, ToolCalls)]


def _delays(effect: Effect) -> list[float]:
    if isinstance(effect, Sleep):
        return [effect.seconds]
    if isinstance(effect, ToolCalls):
        return [c.backoff.seconds for c in effect.calls
                if c.backoff is not None and c.backoff.since == effect.id]
    return []


@dataclass
class _Scripts:
    responses: list[ModelResponse | ModelError]
    tools: Mapping[str, ToolScript]
    config: MachineConfig
    used: dict[str, int] = field(default_factory=dict)

    def next_response(self) -> ModelResponse | ModelError:
        if not self.responses:
            raise DriveScriptError("the machine asked the model for a response but the script "
                                   "has none left; add ModelResponses to model=")
        return self.responses.pop(0)

    def step_for(self, call: ToolCall) -> ToolStep | None:
        key = call.id if call.id in self.tools else call.name
        script = self.tools.get(key)
        if script is None:
            return None
        if not isinstance(script, Sequence):
            return script
        index = self.used.get(key, 0)
        if index >= len(script):
            raise DriveScriptError(f"tool script {key!r} has {len(script)} step(s) but call "
                                   f"{call.id!r} needs step {index + 1}")
        self.used[key] = index + 1
        return script[index]

    def run(self, to_run: CallToRun) -> CallOutcome:
        call = to_run.call
        view = StateView(to_run.state)
        ctx = CallContext(tool_call=call, attempt=to_run.attempt, state=view,
                          completion_keys=_DrivenKeys(call.id))
        step = self.step_for(call)
        configured = self.config.tool_named(call.name)
        result: HandlerResult
        if step is None:
            if configured is None or configured.handler is None:
                raise DriveScriptError(f"no scripted outcome for call {call.id!r} of tool "
                                       f"{call.name!r}; add it to tools= (by id or name)")
            result = execute(configured, call.arguments, ctx)
        elif isinstance(step, Ok | Err | AskUser | Halt | Pending):
            result = step
        else:
            schema = configured.input_schema if configured is not None else {"type": "object"}
            result = execute(Tool(name=call.name, handler=step, input_schema=schema),
                             call.arguments, ctx)
        result, text = encode_checked(result, tool_name=call.name, tool_call_id=call.id)
        return CallOutcome(call_id=call.id, result=result, text=text, writes=view.writes)


class _DrivenKeys:
    """Completion keys of a driven call: there is no store, so the key only names the call;
    a handler may take it and return ``Pending`` as it would in a durable run."""

    def __init__(self, call_id: str) -> None:
        self._call_id = call_id
        self.issued: str | None = None

    def issue(self) -> str:
        self.issued = f"driven:{self._call_id}"
        return self.issued


def _answers_for(done: Done, answers: Answers | None) -> dict[str, Any]:
    outcome = done.outcome
    if answers is None or not isinstance(outcome, Suspended):
        return {}
    waiting: list[Question | ManualCall | PendingCall] = [
        *outcome.questions, *outcome.manual, *outcome.pending]
    if callable(answers):
        return {w.call_id: answers(w) for w in waiting}
    return {w.call_id: answers[w.call_id] for w in waiting if w.call_id in answers}


def drive(
    config: MachineConfig,
    prompt: str | Sequence[Message],
    *,
    model: Sequence[ModelResponse | str | ModelError],
    tools: Mapping[str, ToolScript] | None = None,
    answers: Answers | None = None,
    state: Mapping[str, Any] | None = None,
    delivery: Delivery = "together",
    answer_one_by_one: bool = False,
    roundtrip: bool = False,
    max_effects: int = 10_000,
) -> DriveResult:
    """Run a ``TurnMachine`` to its end with scripted model responses and tool outcomes.

    ``model`` lists the model's answers in order; a ``ModelError`` among them is a failed model
    call (it goes to ``on_model_error``, and a retry takes the next answer).
    ``tools`` maps a call id or tool name to a ``HandlerResult``, a handler run inline, or a
    list of those consumed one per run; a tool without a script runs its configured handler.
    ``answers`` (a mapping by call id, or a function of the ``Question``, ``ManualCall`` or
    ``PendingCall``) resumes suspensions; without one, the run ends ``Suspended``.
    ``delivery`` sends a batch's outcomes together, one by one, or one by one in reverse (a
    retry starts while its siblings' outcomes are still to come).
    ``roundtrip`` checkpoints the machine after every step, restores it from JSON and checks
    it re-emits the same effect.
    """
    scripts = _Scripts(
        responses=[ModelResponse(text=r) if isinstance(r, str) else r for r in model],
        tools=tools or {}, config=config)
    driver = _Driver(config, scripts, delivery, roundtrip, max_effects)
    return driver.run(prompt, state, answers, answer_one_by_one)


class _Driver:
    """The loop of :func:`drive`; ``machine`` is replaced by its restored copy on roundtrips."""

    def __init__(self, config: MachineConfig, scripts: _Scripts, delivery: Delivery,
                 roundtrip: bool, max_effects: int) -> None:
        self.config = config
        self.scripts = scripts
        self.delivery = delivery
        self.roundtrip = roundtrip
        self.max_effects = max_effects
        self.machine = TurnMachine(config)
        self.trace: list[Effect] = []

    def run(self, prompt: str | Sequence[Message], state: Mapping[str, Any] | None,
            answers: Answers | None, answer_one_by_one: bool) -> DriveResult:
        self.record(self.machine.start(prompt, state=state))
        while True:
            waiting = self.trace[-1]
            if isinstance(waiting, Done):
                found = _answers_for(waiting, answers)
                if not found:
                    return DriveResult(outcome=waiting.outcome, trace=self.trace,
                                       machine=self.machine)
                if answer_one_by_one:
                    found = dict([next(iter(found.items()))])
                self.record(self.machine.resume(found))
            elif isinstance(waiting, LlmCall):
                response = self.scripts.next_response()
                self.record(self.machine.send(
                    NotPerformed(waiting.id, response) if isinstance(response, ModelError)
                    else ModelReplied(waiting.id, response)))
            elif isinstance(waiting, Sleep):
                self.record(self.machine.send(Slept(waiting.id)))
            elif isinstance(waiting, ToolCalls):
                self.deliver(waiting)
            else:
                raise DriveScriptError(f"the machine's last effect {waiting!r} waits for nothing")

    def record(self, effects: list[Effect]) -> None:
        self.trace.extend(effects)
        if len(self.trace) > self.max_effects:
            raise DriveScriptError(f"the run emitted more than {self.max_effects} effects")
        if self.roundtrip:
            self.machine = _roundtrip(self.config, self.machine)

    def deliver(self, effect: ToolCalls) -> None:
        """Run the effect's calls and send their outcomes, as ``delivery`` says, until no call
        of the step runs. A retry is run as soon as an effect lists it (its backoff is only
        recorded), and a superseding effect's calls already run are not run again."""
        ran: set[tuple[int, int, str]] = set()
        outcomes: list[CallOutcome] = []
        while True:
            for to_run in effect.calls:
                key = (to_run.turn, to_run.attempt, to_run.call.id)
                if key not in ran:
                    ran.add(key)
                    outcomes.append(self.scripts.run(to_run))
            if self.delivery == "together":
                sent, outcomes = outcomes, []
            else:
                sent = [outcomes.pop(-1 if self.delivery == "reversed" else 0)]
            self.record(self.machine.send(ToolResults(effect.id, tuple(sent))))
            waiting = self.machine.outstanding
            if not isinstance(waiting, ToolCalls):
                return
            effect = waiting


def _roundtrip(config: MachineConfig, machine: TurnMachine) -> TurnMachine:
    checkpoint = machine.checkpoint()
    restored = TurnMachine.restore(config, checkpoint.to_json())
    if restored.checkpoint() != checkpoint:
        raise AssertionError("a checkpoint restored from JSON differs from the original")
    if restored.reemit() != machine.reemit():
        raise AssertionError(f"the restored machine re-emits {restored.reemit()!r}, the "
                             f"original waits for {machine.reemit()!r}")
    return restored
