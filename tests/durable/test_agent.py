"""Deferred completion through the agent: keys, resolution, deadlines, cancellation."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import StoreTargets
from toolvisor import (
    Agent,
    AskUser,
    CallContext,
    Completed,
    Durability,
    Failed,
    Halted,
    Ok,
    Pending,
    Suspended,
    Tool,
    ToolError,
)
from toolvisor.contract import (
    CapabilityError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResultMessage,
)
from toolvisor.durable import DurableError, RunStore, open_store
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls, execute


@pytest.fixture
def store(store_target: str) -> Iterator[RunStore]:
    with open_store(store_target, poll_interval=0.01) as opened:
        yield opened


def decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def shown(request: ModelRequest) -> dict[str, Any]:
    """The tool results the model was shown, by call id, decoded."""
    return {m.tool_call_id: decoded(m.content) for m in request.messages
            if isinstance(m, ToolResultMessage)}


def one_call(name: str, arguments: dict[str, Any] | None = None) -> FunctionModel:
    """Turn 1 calls ``name`` once (id ``c1``); turn 2 answers with what the call returned."""
    def respond(request: ModelRequest) -> ModelResponse:
        seen = shown(request)
        if not seen:
            return calls(call(name, arguments or {}, id="c1"))
        return ModelResponse(text=json.dumps(seen["c1"]))
    return FunctionModel(respond)


def final(outcome: Any) -> Any:
    assert isinstance(outcome, Completed), outcome
    return json.loads(outcome.text)


def pending_tool(**pending: Any) -> Tool:
    def handler(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending(**pending)
    return Tool(name="hook", handler=handler)


def test_a_pending_call_suspends_with_its_key_and_the_resolution_finishes_the_run(
        store: RunStore) -> None:
    with Agent(one_call("hook"), [pending_tool(deadline=600)], store=store) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended)
        assert suspended.run_id is not None and set(suspended.keys) == {"c1"}
        assert store.get_run(suspended.run_id) is not None
        assert agent.resolve(suspended.keys["c1"], ok={"paid": True}) == "accepted"
        assert final(agent.resume_run(suspended.run_id, wait_for=30)) == {"paid": True}
        # late and duplicate resolutions change nothing
        assert agent.resolve(suspended.keys["c1"], ok="again") == "already_resolved"
        assert store.get_run(suspended.run_id).status == "completed"  # type: ignore[union-attr]


def test_an_error_resolution_reaches_the_model_as_a_reported_error(
        store: RunStore) -> None:
    with Agent(one_call("hook"), [pending_tool()], store=store) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended)
        assert agent.resolve(suspended.keys["c1"], error="card declined") == "accepted"
        assert final(agent.resume_run(suspended.run_id or "", wait_for=30)) == {
            "error": "card declined"}


def test_a_resolution_that_arrives_before_the_run_waits_is_kept(
        store: RunStore) -> None:
    def fast_webhook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        key = ctx.completion_key()
        assert store.resolve(key, ok="early") == "accepted"  # the webhook fired at once
        return Pending(deadline=600)

    with Agent(one_call("hook"), [Tool(name="hook", handler=fast_webhook)],
               store=store) as agent:
        assert final(agent.run("go", wait_for=30)) == "early"


def test_a_tampered_or_foreign_key_is_refused_and_changes_nothing(
        store: RunStore, store_targets: StoreTargets) -> None:
    with Agent(one_call("hook"), [pending_tool()], store=store) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended)
        key = suspended.keys["c1"]
        flipped = key[:-2] + ("A" if key[-2] != "A" else "B") + key[-1]
        assert agent.resolve(flipped, ok="forged") == "unknown_or_revoked"
        assert agent.resolve(key + "x", ok="forged") == "unknown_or_revoked"
        with open_store(store_targets.fresh()) as other:
            run = other.create_run()
            foreign = other.issue_key(run.run_id, "c1")
        assert agent.resolve(foreign, ok="forged") == "unknown_or_revoked"
        assert store.resolution(key) is None
        assert agent.resolve(key, ok="real") == "accepted"
        assert final(agent.resume_run(suspended.run_id or "", wait_for=30)) == "real"


def test_a_key_taken_by_a_call_that_did_not_return_pending_is_revoked(
        store: RunStore) -> None:
    taken: list[str] = []

    def changed_its_mind(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        taken.append(ctx.completion_key())
        return Ok("done at once")

    with Agent(one_call("hook"), [Tool(name="hook", handler=changed_its_mind)],
               store=store) as agent:
        assert final(agent.run("go", wait_for=30)) == "done at once"
        assert agent.resolve(taken[0], ok="late") == "unknown_or_revoked"


def test_pending_without_a_key_fails_the_call_with_its_code(
        store: RunStore) -> None:
    keyless = Tool(name="hook", handler=lambda arguments: Pending())
    with Agent(one_call("hook"), [keyless], store=store) as agent:
        seen = final(agent.run("go", wait_for=30))["error"]
    assert seen["reason"] == "invalid_return"
    assert seen["code"] == "pending_tool_missing_completion_key"
    result = execute(keyless, {})  # and without any store at all
    assert isinstance(result.reason, ToolError)  # type: ignore[union-attr]
    assert result.reason.code == "pending_tool_missing_completion_key"  # type: ignore[union-attr]


class StoreClock:
    """A store clock that moves only when the test says so: deadlines pass on demand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> StoreClock:
    return StoreClock()


@pytest.fixture
def clocked(store_target: str, clock: StoreClock) -> Iterator[RunStore]:
    """A store on ``clock``."""
    with open_store(store_target, clock=clock, poll_interval=0.01) as opened:
        yield opened


def test_on_timeout_error_as_result_feeds_a_timeout_error_to_the_model(
        clocked: RunStore, clock: StoreClock) -> None:
    with Agent(one_call("hook"), [pending_tool(deadline=60)], store=clocked) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended)
        clock.now += 61  # past the deadline
        seen = final(agent.resume_run(suspended.run_id or "", wait_for=30))["error"]
        assert agent.resolve(suspended.keys["c1"], ok="too late") == "already_resolved"
    assert seen["reason"] == "timeout"
    assert seen["code"] == "pending_deadline_exceeded"


def test_on_timeout_fail_turn_ends_the_run_failed(
        clocked: RunStore, clock: StoreClock) -> None:
    tool = pending_tool(deadline=60, on_timeout="fail_turn")
    with Agent(one_call("hook"), [tool], store=clocked) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended)
        clock.now += 61  # past the deadline
        outcome = agent.resume_run(suspended.run_id or "", wait_for=30)
    assert isinstance(outcome, Failed), outcome
    assert "fail_turn" in outcome.error
    assert clocked.get_run(suspended.run_id or "").status == "failed"  # type: ignore[union-attr]


@pytest.mark.parametrize("on_cancel", ["cancel_external_work", "ignore"])
def test_cancelling_a_run_cancels_its_waits_and_calls_the_hook_when_asked(
        store: RunStore, on_cancel: str) -> None:
    hooked: list[tuple[str, str]] = []

    def handler(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending(on_cancel=on_cancel)  # type: ignore[arg-type]

    def stop_work(call_: ToolCall, key: str) -> None:
        hooked.append((call_.id, key))

    tool = Tool(name="hook", handler=handler, on_cancel=stop_work)
    with Agent(one_call("hook"), [tool], store=store) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended)
        outcome = agent.cancel_run(suspended.run_id or "", wait_for=30)
        assert isinstance(outcome, Halted) and outcome.reason == "cancelled"
        assert agent.resolve(suspended.keys["c1"], ok="after cancel") == "already_resolved"
    key = suspended.keys["c1"]
    assert store.resolution(key).kind == "cancelled"  # type: ignore[union-attr]
    assert hooked == ([("c1", key)] if on_cancel == "cancel_external_work" else [])


def test_without_a_store_the_durable_capabilities_say_so() -> None:
    for method, code in [(CallContext.completion_key, "completion_keys_unavailable"),
                         (CallContext.durable_effects, "durable_effects_unavailable")]:
        with pytest.raises(CapabilityError) as raised:
            method(CallContext())
        assert raised.value.code == code

    def journaled(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(ctx.durable_effects().run_json("s", 1, lambda x: x))

    with Agent(one_call("j"), [Tool(name="j", handler=journaled)]) as agent:
        seen = final(agent.run("go", wait_for=30))["error"]
        with pytest.raises(DurableError) as raised:
            agent.resolve("tvk1.x.y", ok=1)
    assert seen["reason"] == "handler_raised"
    assert "durable_effects_unavailable" in seen["message"]
    assert raised.value.code == "store_required"
    assert issubclass(DurableError, CapabilityError)


@pytest.mark.parametrize(("operation", "arguments"), [
    ("submit", ("go",)), ("resume_run", ("run-1",)), ("cancel_run", ("run-1",)),
    ("resolve", ("tvk1.x.y",)), ("claim_runs", (1,))])
def test_a_durable_operation_without_a_store_says_it_needs_one(
        operation: str, arguments: tuple[Any, ...]) -> None:
    with Agent(ScriptedModel([])) as agent, pytest.raises(DurableError) as refused:
        getattr(agent, operation)(*arguments)
    assert refused.value.code == "store_required"
    assert str(refused.value).startswith(f"store_required: {operation} needs a run store; "
                                         "create the agent with Agent(..., store='runs.sqlite')")


def test_durable_effects_run_through_the_agent(store: RunStore) -> None:
    ran: list[int] = []

    def journaled(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        effects = ctx.durable_effects()
        effects.emit_process_event("charged", {"cents": 5})
        return Ok(effects.run_json("charge", 5, lambda cents: ran.append(cents) or cents))

    with Agent(one_call("j"), [Tool(name="j", handler=journaled)], store=store) as agent:
        assert final(agent.run("go", wait_for=30)) == 5
    assert ran == [5]
    assert [e.type for e in store.process_events()] == ["charged"]


def test_an_awaited_event_is_cancelled_when_the_runner_gives_up_on_the_call(
        store: RunStore) -> None:
    gave_up = threading.Event()

    def awaits(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        effects = ctx.durable_effects()
        try:
            effects.await_event_json(effects.external_event_key("never"))
        except DurableError as exc:
            assert exc.code == "durable_effect_event_cancelled"
            gave_up.set()
            raise
        return Ok("unreachable")

    with Agent(one_call("slow"), [Tool(name="slow", handler=awaits, timeout=0.1)],
               store=store) as agent:
        seen = final(agent.run("go", wait_for=30))["error"]
        assert gave_up.wait(30)
    assert seen["reason"] == "timeout"


def test_an_asked_question_and_a_pending_key_are_answered_separately(
        store: RunStore) -> None:
    def respond(request: ModelRequest) -> ModelResponse:
        seen = shown(request)
        if not seen:
            return calls(call("ask", id="q"), call("hook", id="c1"))
        return ModelResponse(text=json.dumps(seen))

    ask = Tool(name="ask", handler=lambda arguments: AskUser("sure?"))
    with Agent(FunctionModel(respond), [ask, pending_tool()], store=store) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended) and set(suspended.keys) == {"c1"}
        with pytest.raises(ValueError, match=r"agent\.resolve"):
            agent.resume(suspended, {"c1": "not like this"})
        assert agent.resolve(suspended.keys["c1"], ok="hooked") == "accepted"
        asking = agent.resume_run(suspended.run_id or "", wait_for=30)
        assert isinstance(asking, Suspended) and not asking.keys
        assert asking.run_id == suspended.run_id
        assert final(agent.resume(asking, "yes", wait_for=30)) == {"q": "yes", "c1": "hooked"}


def test_the_durability_settings_are_checked_and_the_store_is_given_once(
        store: RunStore, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lease_ttl must be a positive, finite number"):
        Durability(store=store, lease_ttl=0)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        Durability(signing_keys=[b"short"])
    with pytest.raises(TypeError, match="store must be a RunStore"):
        Durability(store=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"give the store once.*Durability\(store=\.\.\.\)"):
        Agent(one_call("hook"), store=store, durability=Durability(store=store))
    with pytest.raises(TypeError, match="durability must be a Durability"):
        Agent(one_call("hook"), durability=store)  # type: ignore[arg-type]


def test_a_durability_makes_runs_durable_as_store_does(store_target: str) -> None:
    durability = Durability(store=store_target, signing_keys=[b"k" * 32],
                            lease_ttl=5)
    with Agent(one_call("hook"), [pending_tool(deadline=600)],
               durability=durability) as agent:
        suspended = agent.run("go", wait_for=30)
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        assert agent.store is not None and agent.store.get_run(suspended.run_id) is not None
        assert agent.resolve(suspended.keys["c1"], ok="hooked") == "accepted"
        assert final(agent.resume_run(suspended.run_id, wait_for=30)) == "hooked"
