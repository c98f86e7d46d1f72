"""Nothing forged is trusted: a Suspended or a stored checkpoint that was altered, or signed with
another key, is refused with an error that says so."""

from __future__ import annotations

import json
import secrets

import pytest

from tests.support.postgres import behind_the_store
from toolvisor import Agent, AskUser, Completed, Durability, Ok, Suspended, function_tool
from toolvisor.durable import KeyRing, SignatureError, open_store
from toolvisor.testing import ScriptedModel, call, calls

OLD, NEW = secrets.token_bytes(32), secrets.token_bytes(32)


@function_tool
def transfer(amount: int) -> AskUser:
    """Moves money once a human says yes."""
    return AskUser(f"send {amount}?")


def model() -> ScriptedModel:
    return ScriptedModel([calls(call("transfer", {"amount": 10}, id="t1")), "sent"])


def suspended_by(agent: Agent) -> Suspended:
    outcome = agent.run("pay")
    assert isinstance(outcome, Suspended) and outcome.signature is not None
    return Suspended.model_validate_json(outcome.model_dump_json())  # it left the process


def forged(suspended: Suspended) -> Suspended:
    data = json.loads(suspended.model_dump_json())
    data["checkpoint"]["run"]["calls"][0]["call"]["arguments"]["amount"] = 10_000
    return Suspended.model_validate(data)


def test_a_suspended_run_round_trips_as_json_and_resumes() -> None:
    with Agent(model(), [transfer], durability=Durability(signing_keys=[NEW])) as agent:
        assert isinstance(agent.resume(suspended_by(agent), "yes"), Completed)


def test_a_forged_or_unsigned_suspended_is_refused_and_changes_nothing() -> None:
    with Agent(model(), [transfer], durability=Durability(signing_keys=[NEW])) as agent:
        suspended = suspended_by(agent)
        with pytest.raises(SignatureError, match="was altered since an agent gave it out"):
            agent.resume(forged(suspended), "yes")
        with pytest.raises(SignatureError, match="is unsigned"):
            agent.resume(suspended.model_copy(update={"signature": None}), "yes")
        assert isinstance(agent.resume(suspended, "yes"), Completed)  # the real one still works


def test_keys_rotate_newest_first_and_an_unknown_key_is_refused() -> None:
    with Agent(model(), [transfer], durability=Durability(signing_keys=[OLD])) as old_agent:
        signed_with_old = suspended_by(old_agent)
    with Agent(ScriptedModel([]), [transfer],
               durability=Durability(signing_keys=[NEW])) as agent, \
            pytest.raises(SignatureError):
        agent.resume(signed_with_old, "yes")
    with Agent(model(), [transfer], durability=Durability(signing_keys=[NEW, OLD])) as agent:
        assert isinstance(agent.resume(signed_with_old, "yes"), Completed)


def test_signing_keys_are_checked() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        KeyRing([b"short"])
    with pytest.raises(ValueError, match="non-empty sequence"):
        KeyRing(NEW)  # type: ignore[arg-type]


def test_an_altered_stored_checkpoint_is_refused(store_target: str) -> None:
    path = store_target
    with open_store(path) as store, Agent(model(), [transfer], store=store) as agent:
        suspended = agent.run("pay")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
    behind_the_store(path, "UPDATE checkpoints SET data = replace(data, '\"amount\":10', "
                           "'\"amount\":10000')")
    with open_store(path) as store, \
            Agent(model(), [transfer], store=store) as agent:
        with pytest.raises(SignatureError, match="was altered, or not written by this store"):
            agent.resume(suspended, "yes")
        with pytest.raises(SignatureError):
            agent.resume_run(suspended.run_id)


def test_ok_answers_still_pass_through_a_signed_resume() -> None:
    with Agent(model(), [transfer], durability=Durability(signing_keys=[NEW])) as agent:
        assert isinstance(agent.resume(suspended_by(agent), Ok("yes")), Completed)
