"""A checkpoint's JSON: one written by an earlier toolvisor restores and is written back byte
for byte; current ones are validated straight from their text; a malformed message is refused
naming its field; every message a run holds is of exactly one of ``Message``'s classes."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolvisor.machine._checkpoint as checkpoint_module
from toolvisor.contract import (
    AskUser,
    ModelResponse,
    Ok,
    SystemMessage,
    Tool,
    ToolCall,
    Usage,
    UserMessage,
)
from toolvisor.machine import (
    CallOutcome,
    Checkpoint,
    CheckpointError,
    Done,
    LlmCall,
    MachineConfig,
    ModelReplied,
    Suspended,
    ToolResults,
    TurnMachine,
)

CONFIG = MachineConfig(tools=[Tool(name="lookup"), Tool(name="ask")], seed=5)

# Written by toolvisor before a checkpoint's messages were serialized each by its own class and
# current checkpoints validated straight from JSON: a system, a user, two assistant messages
# (raw arguments text, then an arguments object) and a tool result, suspended on a question.
WRITTEN_BEFORE = (
    '{"version":4,"run":{"phase":"suspended","mode":"parallel_batch_approval","seed":5,'
    '"next_effect_id":13,"turns":2,"model_attempt":1,"messages":['
    '{"role":"system","content":"be brief"},{"role":"user","content":"find é, then ask"},'
    '{"role":"assistant","content":"looking","tool_calls":[{"id":"a","name":"lookup",'
    '"arguments":{"q":"é"},"raw_arguments":"{ \\"q\\" : \\"é\\" }"}]},'
    '{"role":"tool","tool_call_id":"a","name":"lookup","content":"{\\"hit\\":1}",'
    '"is_error":false},{"role":"assistant","content":null,"tool_calls":[{"id":"b",'
    '"name":"ask","arguments":{"n":[1,2.5,null]},"raw_arguments":null}]}],'
    '"usage":{"input_tokens":7,"output_tokens":3,"cached_tokens":null},"state":{},'
    '"conflicts":[],"calls":[{"call":{"id":"b","name":"ask","arguments":{"n":[1,2.5,null]},'
    '"raw_arguments":null},"step":0,"known":true,"retryable":false,"status":"suspended",'
    '"attempt":1,"text":null,"is_error":false,"question":{"call_id":"b","tool":"ask",'
    '"question":"go on?","options":["yes","no"],"expires_in":null,"default":null,'
    '"expires_at":null},"manual":null,"pending":null,"writes":{},"halt":null,'
    '"retry_delay":null,"notes":[]}],"steps":[{"calls":[0],"snapshot":{},"committed":true,'
    '"manual":false}],"cursor":1,"outstanding":null,"done_effect_id":12,"final":null}}'
)


def suspended_machine() -> TurnMachine:
    """The run ``WRITTEN_BEFORE`` was taken from, driven again by this toolvisor."""
    machine = TurnMachine(CONFIG)
    llm = machine.start([SystemMessage(content="be brief"),
                         UserMessage(content="find é, then ask")])[-1]
    batch = machine.send(ModelReplied(llm.id, ModelResponse(
        text="looking", usage=Usage(input_tokens=7, output_tokens=3),
        tool_calls=(ToolCall.from_text("a", "lookup", '{ "q" : "é" }'),))))[-1]
    llm = machine.send(ToolResults(batch.id, (CallOutcome("a", Ok({"hit": 1})),)))[-1]
    batch = machine.send(ModelReplied(llm.id, ModelResponse(tool_calls=(
        ToolCall(id="b", name="ask", arguments={"n": [1, 2.5, None]}),))))[-1]
    done = machine.send(ToolResults(batch.id, (
        CallOutcome("b", AskUser("go on?", ("yes", "no"))),)))[-1]
    assert isinstance(done, Done) and isinstance(done.outcome, Suspended)
    return machine


def test_a_checkpoint_written_before_restores_and_is_written_back_byte_for_byte() -> None:
    assert suspended_machine().checkpoint().to_json() == WRITTEN_BEFORE
    restored = TurnMachine.restore(CONFIG, WRITTEN_BEFORE)
    assert restored.checkpoint().to_json() == WRITTEN_BEFORE
    assert restored.checkpoint() == suspended_machine().checkpoint()
    assert isinstance(restored.resume({"b": "yes"})[-1], LlmCall)


def test_a_current_checkpoint_is_validated_straight_from_its_text(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only an older version goes through the upgrade (which needs the text as Python objects
    first); the current one is validated from its JSON text as it is."""
    upgraded: list[int] = []
    real_upgrade = checkpoint_module.upgrade

    def recorded(data: dict[str, Any], version: int) -> dict[str, Any]:
        upgraded.append(version)
        return real_upgrade(data, version)

    monkeypatch.setattr(checkpoint_module, "upgrade", recorded)
    assert Checkpoint.from_json(WRITTEN_BEFORE).to_json() == WRITTEN_BEFORE
    assert upgraded == []
    older = json.loads(WRITTEN_BEFORE)
    older["version"] = 3
    assert Checkpoint.from_json(json.dumps(older)).to_json() == WRITTEN_BEFORE
    assert upgraded == [3]


@pytest.mark.parametrize(("tamper", "message"), [
    (lambda m: m[2]["tool_calls"][0]["arguments"].update(q="x"),
     "run.messages.2.assistant.tool_calls.0: Value error, ToolCall.arguments must be what "
     "raw_arguments parses to"),
    (lambda m: m[1].update(role="robot"),
     "run.messages.1: Input tag 'robot' found using 'role' does not match"),
    (lambda m: m[3].update(content=5), "run.messages.3.tool.content: Input should be a valid "
                                       "string"),
    (lambda m: m[3].pop("tool_call_id"), "run.messages.3.tool.tool_call_id: Field required"),
    (lambda m: m[0].update(surprise=1), "run.messages.0.system.surprise: Extra inputs"),
])
def test_a_malformed_message_is_refused_naming_its_field(tamper: Any, message: str) -> None:
    data = json.loads(WRITTEN_BEFORE)
    tamper(data["run"]["messages"])
    with pytest.raises(CheckpointError, match="not a valid toolvisor checkpoint") as refused:
        TurnMachine.restore(CONFIG, json.dumps(data))
    assert message in str(refused.value)


class Quoted(UserMessage):
    """A message class of the caller's own, with nothing more than a user message."""


class Tagged(UserMessage):
    """A message class of the caller's own, with a field no checkpoint can restore."""

    tag: str = "mine"


def test_a_run_holds_only_the_message_classes_themselves() -> None:
    """A subclass is taken as the message it is (a checkpoint writes each message with its own
    class's serializer); one with fields of its own is refused at once, naming them, rather
    than written into a checkpoint that would not restore."""
    machine = TurnMachine(CONFIG)
    machine.start([Quoted(content="hi")])
    [message] = machine.checkpoint().run.messages
    assert type(message) is UserMessage and message == UserMessage(content="hi")
    assert TurnMachine.restore(CONFIG, machine.checkpoint().to_json()).checkpoint() == \
        machine.checkpoint()
    with pytest.raises(TypeError, match=r"0\.user\.tag\n  Extra inputs are not permitted"):
        TurnMachine(CONFIG).start([Tagged(content="hi")])


def test_a_checkpoint_shares_the_messages_but_not_the_list() -> None:
    machine = suspended_machine()
    taken = machine.checkpoint()
    before = taken.to_json()
    machine.resume({"b": "yes"})
    later = machine.checkpoint()
    assert taken.to_json() == before and len(later.run.messages) == len(taken.run.messages) + 1
    assert all(a is b for a, b in zip(taken.run.messages, later.run.messages, strict=False))
