"""``ctx.idempotency_key``: the same for every attempt of a call (a policy's retry) and after
its run resumes in a new process (the host SIGKILLed), different for every other call of every
run, and the same in a worker process as in the agent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hosts import ROOT, Start, kill, next_line, started_hosts
from toolvisor import Agent, CallContext, Completed, Err, Ok, Tool, ToolCall
from toolvisor.executor import ToolRunner
from toolvisor.isolation import prepare_process_isolation
from toolvisor.machine import RetryPolicy
from toolvisor.testing import ScriptedModel, call, calls

HOST = [sys.executable, "-m", "tests.programs.keyed_host"]
SCHEMA = {"type": "object"}


class Keys:
    """A handler that writes down the key of each attempt; the first attempt of each call
    fails (a crash, which the retry policy retries)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str | None, int | None, str | None], dict[int, str | None]] = {}

    def __call__(self, arguments: Any, ctx: CallContext) -> Ok:
        call = (ctx.session_id, ctx.turn, ctx.tool_call_id)
        self.seen.setdefault(call, {})[ctx.attempt] = ctx.idempotency_key
        if ctx.attempt == 1:
            raise ConnectionError("the payment provider hung up")
        return Ok("charged")


def test_the_key_is_the_same_for_every_attempt_and_differs_between_calls_and_runs() -> None:
    keys = Keys()
    tool = Tool(name="charge", handler=keys, input_schema=SCHEMA, retryable=True)
    script = [calls(call("charge", {}, id="c1"), call("charge", {}, id="c2")),
              calls(call("charge", {}, id="c1")), "done"]  # c1 again, in turn 2
    with Agent(ScriptedModel(script * 2), [tool],
               on_tool_error=RetryPolicy(base_delay=0.01, jitter=0)) as agent:
        first, second = agent.run("charge twice"), agent.run("charge twice again")
    assert isinstance(first, Completed) and isinstance(second, Completed)
    assert {(turn, call_id) for _, turn, call_id in keys.seen} \
        == {(1, "c1"), (1, "c2"), (2, "c1")}
    assert len(keys.seen) == 6  # three calls in each of the two runs
    for attempts in keys.seen.values():
        assert sorted(attempts) == [1, 2]
        assert attempts[1] == attempts[2]  # the retry has its first attempt's key
        assert attempts[1] is not None and len(attempts[1]) == 64
    assert len({attempts[1] for attempts in keys.seen.values()}) == 6  # one per call


def test_the_key_is_none_outside_a_run_and_the_same_in_a_worker_process() -> None:
    assert CallContext().idempotency_key is None
    ctx = CallContext(session_id="run-1", turn=2, tool_call=ToolCall(id="c1", name="key"))
    assert ctx.idempotency_key is not None and "run-1" not in ctx.idempotency_key
    prepare_process_isolation()
    with ToolRunner(process_workers=1) as runner:
        result = runner.run(Tool(name="key", handler=key_of, isolation="process"), {}, ctx)
    assert result == Ok(ctx.idempotency_key)


def key_of(arguments: Any, ctx: CallContext) -> Ok | Err:
    """Runs in a worker process: the key it sees there."""
    return Ok(ctx.idempotency_key)


@pytest.fixture
def host() -> Iterator[Start]:
    with started_hosts("tests.programs.keyed_host") as start:
        yield start


def test_the_key_is_the_same_after_the_host_is_killed_and_the_run_resumed(
        tmp_path: Path, host: Start) -> None:
    store, log = tmp_path / "runs.sqlite", tmp_path / "keys.log"
    first = host("first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "charge"}
    kill(first)
    charged_before = [k for n, k in map(str.split, log.read_text().splitlines())
                      if n == "charge"]

    done = subprocess.run([*HOST, "resume", str(store), str(tmp_path), run_id], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    outcome = json.loads(done.stdout.splitlines()[-1])["outcome"]
    assert outcome["kind"] == "completed", outcome
    told = json.loads(outcome["text"])
    written = [line.split() for line in log.read_text().splitlines()]
    charged = [key for name, key in written if name == "charge"]
    notified = {key for name, key in written if name == "notify"}
    assert len(charged) == 2 and charged_before == charged[:1]  # ran again after the crash
    assert charged[0] == charged[1] == told["c1"]  # ... with the same key
    assert len(notified) == 1 and charged[0] not in notified  # another call, another key
