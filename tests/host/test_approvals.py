"""A human approval is bound to what the human saw and used once: the question and its options
come from the signed checkpoint, answers fit the options, a Suspended resumes once, and a
question may expire into its default (durably, on the host's clock)."""

from __future__ import annotations

import io
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from toolvisor import (
    Agent,
    AlreadyResumedError,
    AskUser,
    Clocks,
    Completed,
    Ok,
    Pending,
    Suspended,
    Tool,
    ToolError,
)
from toolvisor.contract import ModelResponse, ToolCall, ToolResultMessage
from toolvisor.durable import SignatureError, SqliteRunStore
from toolvisor.machine import (
    QUESTION_EXPIRED_CODE,
    CallAttempt,
    CallOutcome,
    ContinueRun,
    LlmCall,
    LogEvent,
    MachineConfig,
    ModelReplied,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.observe import live, render
from toolvisor.testing import FakeClock, FunctionModel, ScriptedModel, call, calls

DEPLOY = Tool(name="deploy", handler=lambda a: AskUser(f"Deploy to {a['env']}?", ("yes", "no")))


def asking(*tools: Tool) -> FunctionModel:
    """Calls the first tool (id ``d1``, ``env=prod``) until a tool result comes back, then says
    what the tool answered."""
    def respond(request: Any) -> Any:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return f"tool said: {last.content}"
        return calls(call(tools[0].name, {"env": "prod"}, id="d1"))
    return FunctionModel(respond)


def final_text(outcome: Any) -> str:
    assert isinstance(outcome, Completed), outcome
    return outcome.text or ""


# --- what a human is shown is signed -----------------------------------------------------------

@pytest.mark.parametrize("edit", [
    lambda d: d["questions"][0].update(question="Deploy to staging?"),
    lambda d: d["questions"][0].update(options=["yes", "yes, to staging"]),
    lambda d: d["questions"].clear(),
])
def test_a_forged_question_or_options_over_the_real_call_are_refused(edit: Any) -> None:
    with Agent(asking(DEPLOY), [DEPLOY]) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        data = json.loads(suspended.model_dump_json())
        edit(data)
        with pytest.raises(ValueError, match="does not match its checkpoint: it was altered"):
            Suspended.model_validate_json(json.dumps(data))
        assert final_text(agent.resume(suspended, "yes")) == "tool said: yes"


def test_what_a_human_is_shown_is_read_from_the_signed_checkpoint() -> None:
    with Agent(asking(DEPLOY), [DEPLOY]) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        [question] = suspended.questions
        assert (question.question, question.options) == ("Deploy to prod?", ("yes", "no"))
        copied = suspended.model_copy(update={"questions": ()})  # nothing to replace
        assert copied.questions == suspended.questions
        data = json.loads(suspended.model_dump_json())
        data["checkpoint"]["run"]["calls"][0]["question"]["question"] = "Deploy to staging?"
        del data["questions"]  # the altered checkpoint is consistent, but no longer signed
        altered = Suspended.model_validate(data)
        assert altered.questions[0].question == "Deploy to staging?"
        with pytest.raises(SignatureError, match="was altered since an agent gave it out"):
            agent.resume(altered, "yes")


# --- answers fit the question ------------------------------------------------------------------

def test_an_answer_outside_the_options_is_refused_naming_them_and_changes_nothing() -> None:
    with Agent(asking(DEPLOY), [DEPLOY]) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        for answer in ("maybe", Ok("maybe"), {"d1": "YES"}, 1):
            with pytest.raises(ValueError, match=re.escape("options ['yes', 'no']")):
                agent.resume(suspended, answer)
        assert final_text(agent.resume(suspended, "no")) == "tool said: no"


def test_an_off_option_answer_is_refused_in_a_durable_run_too(tmp_path: Path) -> None:
    with Agent(asking(DEPLOY), [DEPLOY], store=tmp_path / "runs.sqlite") as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        with pytest.raises(ValueError, match=re.escape("'maybe' to call 'd1'")):
            agent.resume(suspended, "maybe")
        assert final_text(agent.resume(suspended, "yes")) == "tool said: yes"


def test_a_question_without_options_takes_a_free_answer() -> None:
    free = Tool(name="ask", handler=lambda a: AskUser("Which region?"))
    with Agent(asking(free), [free]) as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended)
        assert final_text(agent.resume(suspended, "maybe eu-west")) == "tool said: maybe eu-west"


def test_ask_user_refuses_settings_that_could_not_be_honoured() -> None:
    with pytest.raises(ValueError, match=r"default 'later' is not one of the options \['yes'"):
        AskUser("ok?", ("yes", "no"), expires_in=60, default="later")
    with pytest.raises(ValueError, match="give expires_in too"):
        AskUser("ok?", ("yes", "no"), default="no")
    with pytest.raises(ValueError, match="expires_in must be a positive, finite number"):
        AskUser("ok?", expires_in=0)
    with pytest.raises(ValueError, match="options is empty"):
        AskUser("ok?", ())
    assert AskUser("ok?", ("yes", "no"), expires_in=5, default="no").default == "no"


# --- a Suspended resumes once ------------------------------------------------------------------

def test_without_a_store_the_same_suspended_resumes_once_in_an_agent() -> None:
    with Agent(asking(DEPLOY), [DEPLOY]) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        assert final_text(agent.resume(suspended, "yes")) == "tool said: yes"
        with pytest.raises(AlreadyResumedError, match=f"run {suspended.run_id}: this "
                           "Suspended was resumed already"):
            agent.resume(Suspended.model_validate_json(suspended.model_dump_json()), "yes")


def test_without_a_store_two_threads_resuming_one_suspended_run_it_once() -> None:
    with Agent(asking(DEPLOY), [DEPLOY]) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        results: list[Any] = []
        start = threading.Barrier(2)

        def resume() -> None:
            start.wait()
            try:
                results.append(agent.resume(suspended, "yes"))
            except AlreadyResumedError as exc:
                results.append(exc)

        threads = [threading.Thread(target=resume) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(type(r).__name__ for r in results) == ["AlreadyResumedError", "Completed"]


def test_with_a_store_a_suspended_resumes_once_across_agents(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with Agent(asking(DEPLOY), [DEPLOY], store=path) as first:
        suspended = first.run("ship it")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        assert final_text(first.resume(suspended, "yes")) == "tool said: yes"
    with Agent(asking(DEPLOY), [DEPLOY], store=path) as second, \
            pytest.raises(AlreadyResumedError, match=f"run {suspended.run_id}: .*call\\(s\\) "
                          r"\['d1'\] no longer wait"):
        second.resume(suspended, "no")


def test_an_old_suspended_cannot_answer_a_new_question_that_reuses_its_call_id(
        tmp_path: Path) -> None:
    """The model reuses call id d1 in turn 2: the first Suspended asked about turn 1's d1."""
    model = ScriptedModel([calls(call("deploy", {"env": "staging"}, id="d1")),
                           calls(call("deploy", {"env": "prod"}, id="d1")), "done"])
    with Agent(model, [DEPLOY], store=tmp_path / "runs.sqlite") as agent:
        staging = agent.run("ship it")
        assert isinstance(staging, Suspended)
        prod = agent.resume(staging, "yes")
        assert isinstance(prod, Suspended) and prod.questions[0].question == "Deploy to prod?"
        with pytest.raises(AlreadyResumedError, match="resumed already"):
            agent.resume(staging, "yes")  # approving staging again must not approve prod
        assert final_text(agent.resume(prod, "no")) == "done"


# --- questions expire --------------------------------------------------------------------------

EXPIRING = Tool(name="deploy", handler=lambda a: AskUser(
    f"Deploy to {a['env']}?", ("yes", "no"), expires_in=60))
DEFAULTING = Tool(name="deploy", handler=lambda a: AskUser(
    "Deploy?", ("yes", "no"), expires_in=60, default="no"))


class Seen:
    """An ``on_tool_error`` that records what it was asked and goes on."""

    def __init__(self) -> None:
        self.errors: list[Any] = []
        self.decided = threading.Event()

    def __call__(self, call: CallAttempt, error: Any) -> ContinueRun:
        self.errors.append(error)
        self.decided.set()
        return ContinueRun()


def expired_code(seen: Seen) -> str | None:
    [error] = seen.errors
    assert isinstance(error, ToolError) and error.reason == "timeout"
    return error.code


def test_without_a_store_a_resume_after_the_deadline_gets_the_default_not_the_answer() -> None:
    clock, seen = FakeClock(1000.0), Seen()
    with Agent(asking(EXPIRING), [EXPIRING], clocks=Clocks(wall=clock),
               on_tool_error=seen) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        assert suspended.questions[0].expires_at == 1060.0 == suspended.expires_at
        clock.advance(61)
        text = final_text(agent.resume(suspended, "yes"))  # too late: not applied
    assert expired_code(seen) == QUESTION_EXPIRED_CODE
    assert "question_expired" in text and "yes" not in text


def test_a_declared_default_answers_an_expired_question() -> None:
    clock = FakeClock(0.0)
    with Agent(asking(DEFAULTING), [DEFAULTING], clocks=Clocks(wall=clock)) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        clock.advance(60)
        assert final_text(agent.resume(suspended, "yes")) == "tool said: no"


def test_a_hosted_question_is_answered_by_its_default_at_the_deadline(tmp_path: Path) -> None:
    clock, seen = FakeClock(1000.0), Seen()
    with SqliteRunStore(tmp_path / "runs.sqlite", clock=clock, poll_interval=0.01) as store, \
            Agent(asking(EXPIRING), [EXPIRING], store=store, on_tool_error=seen) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        assert suspended.expires_at == 1060.0
        assert not seen.decided.is_set()
        clock.advance(60)  # nobody resumes: the host's timer answers it
        assert seen.decided.wait(10)
        assert "question_expired" in final_text(agent.resume_run(suspended.run_id, wait_for=10))
        with pytest.raises(AlreadyResumedError, match=r"its question expired at 1060\.0"):
            agent.resume(suspended, "yes")
    assert expired_code(seen) == QUESTION_EXPIRED_CODE


def test_a_question_deadline_survives_a_restart_and_a_late_answer_is_discarded(
        tmp_path: Path) -> None:
    clock, seen = FakeClock(1000.0), Seen()
    path = tmp_path / "runs.sqlite"
    with SqliteRunStore(path, clock=clock) as store, \
            Agent(asking(EXPIRING), [EXPIRING], store=store) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
    clock.advance(30)  # a restart half way: the deadline does not move
    with SqliteRunStore(path, clock=clock) as store, \
            Agent(asking(EXPIRING), [EXPIRING], store=store) as agent:
        again = agent.resume_run(suspended.run_id, wait_for=10)
        assert isinstance(again, Suspended) and again.expires_at == 1060.0
    clock.advance(31)  # past it while no process hosts the run
    with SqliteRunStore(path, clock=clock) as store, \
            Agent(asking(EXPIRING), [EXPIRING], store=store, on_tool_error=seen) as agent:
        text = final_text(agent.resume(suspended, "yes"))
    assert expired_code(seen) == QUESTION_EXPIRED_CODE
    assert "question_expired" in text and "yes" not in text


def test_a_restart_after_the_deadline_answers_by_default_on_resume_run(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    path = tmp_path / "runs.sqlite"
    with SqliteRunStore(path, clock=clock) as store, \
            Agent(asking(DEFAULTING), [DEFAULTING], store=store) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
    clock.advance(120)
    with SqliteRunStore(path, clock=clock) as store, \
            Agent(asking(DEFAULTING), [DEFAULTING], store=store) as agent:
        assert final_text(agent.resume_run(suspended.run_id, wait_for=10)) == "tool said: no"


def test_the_deadline_shows_in_the_suspended_and_its_short_repr(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    with SqliteRunStore(tmp_path / "runs.sqlite", clock=clock) as store, \
            Agent(asking(EXPIRING), [EXPIRING], store=store) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        shown = repr(suspended)
        assert shown == str(suspended) == (
            f"Suspended(run_id={suspended.run_id!r}, questions=[d1: 'Deploy to prod?' "
            "['yes', 'no']], expires_at=1060.0 (1970-01-01 00:17:40 UTC))")
        full = suspended.model_dump_json()
        assert len(shown) < 200 < len(full) and '"checkpoint"' in full
        assert json.loads(full)["questions"][0]["expires_at"] == 1060.0


def test_the_repr_names_the_keys_calls_not_the_keys(tmp_path: Path) -> None:
    def hook(arguments: dict[str, Any], ctx: Any) -> Any:
        ctx.completion_key()
        return Pending(deadline=600)

    with Agent(ScriptedModel([calls(call("hook", id="h1"))]), [Tool("hook", handler=hook)],
               store=tmp_path / "runs.sqlite") as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended)
        shown = repr(suspended)
        assert "pending=['h1']" in shown and "keys=['h1']" in shown
        assert suspended.keys["h1"] not in shown


def test_the_live_view_shows_a_question_deadline_and_its_expiry() -> None:
    clock, out = FakeClock(0.0), io.StringIO()
    with live(out) as board, Agent(asking(EXPIRING), [EXPIRING],
                                   clocks=Clocks(wall=clock)) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        console = Console(file=io.StringIO(), width=120, color_system=None)
        console.print(render(board))
        assert "asks until 1970-01-01 00:01:00 UTC" in console.file.getvalue()  # type: ignore[attr-defined]
        clock.advance(61)
        agent.resume(suspended, "yes")
    lines = out.getvalue()
    assert "deploy (d1) asks until 1970-01-01 00:01:00 UTC" in lines
    assert "deploy (d1) question expired: denied by default (a late answer was discarded)" in lines
    [run] = board.runs()
    assert run.turns[1].calls["d1"].attempts[-1][1] == "expired, denied"


# --- another key is not an alteration ----------------------------------------------------------

def test_a_suspended_signed_with_another_agents_key_says_so() -> None:
    with Agent(asking(DEPLOY), [DEPLOY]) as first:
        suspended = first.run("ship it")
        assert isinstance(suspended, Suspended)
    with Agent(asking(DEPLOY), [DEPLOY]) as second:
        with pytest.raises(SignatureError, match=r"signed with another key .*not altered.*"
                           r"Durability\(signing_keys=\[\.\.\.\]\).*common store") as refused:
            second.resume(suspended, "yes")
        assert "altered since" not in str(refused.value)
        with pytest.raises(SignatureError, match="is unsigned"):
            second.resume(suspended.model_copy(update={"signature": None}), "yes")


def test_a_suspended_from_another_store_says_so(tmp_path: Path) -> None:
    with Agent(asking(DEPLOY), [DEPLOY], store=tmp_path / "a.sqlite") as first:
        suspended = first.run("ship it")
        assert isinstance(suspended, Suspended)
    with Agent(asking(DEPLOY), [DEPLOY], store=tmp_path / "b.sqlite") as second, \
            pytest.raises(SignatureError, match="signed with another key"):
        second.resume(suspended, "yes")


# --- the machine: pure, the time given by the host ----------------------------------------------

def suspended_machine(handler_result: AskUser) -> TurnMachine:
    machine = TurnMachine(MachineConfig(tools=[Tool(name="ask")]))
    [llm] = [e for e in machine.start("go") if isinstance(e, LlmCall)]
    effects = machine.send(ModelReplied(llm.id, ModelResponse(
        tool_calls=(ToolCall(id="q", name="ask"),))))
    [batch] = [e for e in effects if isinstance(e, ToolCalls)]
    machine.send(ToolResults(batch.id, (CallOutcome("q", handler_result),)))
    assert machine.status == "suspended"
    return machine


def model_reads(effects: list[Any]) -> str:
    """What the model is asked with last: the run went on to its next turn."""
    llm = effects[-1]
    assert isinstance(llm, LlmCall)
    return str(llm.request.messages[-1].content)


def test_the_machine_dates_a_question_once_and_expires_it_by_the_hosts_clock() -> None:
    machine = suspended_machine(AskUser("ok?", ("yes", "no"), expires_in=60))
    [dated] = machine.date_questions(100.0)
    assert dated.expires_at == 160.0 and machine.date_questions(150.0) == []  # set once
    restored = TurnMachine.restore(machine.config, machine.checkpoint().to_json())
    assert restored.questions_due(159.9) == [] and restored.expire_questions(159.9) == []
    effects = restored.expire_questions(160.0)
    [event] = [e for e in effects if isinstance(e, LogEvent) and e.event == "question_expired"]
    assert event.fields["late_answer"] is False and event.fields["default"] is None
    assert QUESTION_EXPIRED_CODE in model_reads(effects)  # the run goes on, denied


def test_the_machine_discards_an_answer_given_after_the_deadline() -> None:
    machine = suspended_machine(AskUser("ok?", ("yes", "no"), expires_in=5, default="no"))
    machine.date_questions(0.0)
    on_time = TurnMachine.restore(machine.config, machine.checkpoint())
    assert model_reads(on_time.resume({"q": "yes"}, now=4.9)) == "yes"
    effects = machine.resume({"q": "yes"}, now=5.0)
    assert [e.fields["late_answer"] for e in effects
            if isinstance(e, LogEvent) and e.event == "question_expired"] == [True]
    assert model_reads(effects) == "no"
