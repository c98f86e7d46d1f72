"""``isolation="process"`` in a script without ``if __name__ == "__main__":``.

Every worker imports the script again before it runs anything, so a script that runs its agent
at top level would run it once more in each worker. toolvisor refuses in the caller's thread,
before any worker starts, with an error that shows the guard; a guarded script (a handler
defined in it included) works. Each script here is a real program in a file of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from toolvisor.isolation._process._main_guard import guarded_lines

ROOT = Path(__file__).resolve().parents[2]
HANG_BOUND = 120.0  # seconds: only turns a hang into a failure

UNGUARDED = """\
import json
from tests.support import handlers as h
from toolvisor import Agent, Ok, Tool
from toolvisor.executor import ToolRunner
from toolvisor.registry import StaticToolProvider
from toolvisor.testing import ScriptedModel, call, calls

print("the top level runs", flush=True)
echo = Tool(name="echo", handler=h.ok_echo)
pid = Tool(name="pid", handler=h.pid, isolation="process")
refusals = []
with Agent(ScriptedModel(["no process tool: nothing to refuse"]), [echo]) as agent:
    first = agent.run("go").text
    agent.registry.add_source("late", StaticToolProvider([pid]))
    try:
        agent.run("go on")
    except RuntimeError as exc:
        refusals.append(str(exc))
try:
    Agent(ScriptedModel([calls(call("pid", {})), "done"]), [pid])
except RuntimeError as exc:
    refusals.append(str(exc))
with ToolRunner() as runner:
    try:
        runner.run(pid, {})
    except RuntimeError as exc:
        refusals.append(str(exc))


def admit_pid(arguments, ctx):
    ctx.sessions.set_tool_membership(["pid"], True)
    return Ok("admitted")


model = ScriptedModel([calls(call("admit", {})), calls(call("pid", {})),
                       lambda request: request.messages[-1].content])
with Agent(model, [Tool(name="admit", handler=admit_pid)]) as agent:
    agent.registry.add_source("late", StaticToolProvider([pid]), join_catalog=False)
    mid_run = agent.run("admit pid, then call it").text
print(json.dumps({"first": first, "refusals": refusals, "mid_run": mid_run}), flush=True)
"""

GUARDED = """\
import json
import os
from toolvisor import Agent, Limits, Ok, tool
from toolvisor.testing import ScriptedModel, call, calls

print(f"the top level runs as {__name__}", flush=True)


@tool(isolation="process")
def where(arguments: dict) -> Ok:
    return Ok(os.getpid())


def main() -> None:
    model = ScriptedModel([calls(call("where", {})), lambda request: request.messages[-1].content])
    with Agent(model, [where], limits=Limits(process_workers=1)) as agent:
        print(json.dumps({"pid": os.getpid(), "answer": agent.run("where?").text}), flush=True)


if __name__ == "__main__":
    main()
"""


def run_script(path: Path, source: str) -> tuple[list[str], str]:
    """Run ``source`` as the program ``path``; its stdout lines and its stderr."""
    path.write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with subprocess.Popen([sys.executable, str(path)], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        try:
            out, err = process.communicate(timeout=HANG_BOUND)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, err[-3000:]
    return out.splitlines(), err


def test_an_unguarded_script_is_refused_in_its_own_thread_before_any_worker_starts(
        tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    lines, err = run_script(script, UNGUARDED)
    assert lines[0] == "the top level runs"
    report = json.loads(lines[1])
    assert len(lines) == 2, lines  # no worker ran the script again
    assert report["first"] == "no process tool: nothing to refuse"
    refusals = report["refusals"]
    assert len(refusals) == 3, refusals  # a run with a process tool, the agent, the runner
    for refusal in refusals:
        assert "isolation='process' (tools ['pid'])" in refusal
        assert f"({script}:" in refusal and 'if __name__ == "__main__":\n' in refusal
    # A process tool a handler admits mid-run cannot be refused before the run: its call ends
    # not_started with the same text, and still no worker starts.
    mid_run = json.loads(report["mid_run"])["error"]
    assert (mid_run["reason"], mid_run["code"]) == ("handler_exit", "not_started")
    assert 'if __name__ == "__main__":' in mid_run["message"]
    assert "bootstrapping phase" not in err + mid_run["message"]


def test_a_guarded_script_runs_its_own_process_handler_in_a_worker(tmp_path: Path) -> None:
    lines, _ = run_script(tmp_path / "guarded.py", GUARDED)
    assert lines.count("the top level runs as __main__") == 1
    assert "the top level runs as __mp_main__" in lines  # the worker imported the handler
    report = json.loads(next(line for line in lines if line.startswith("{")))
    assert int(report["answer"]) != report["pid"]


def test_the_guard_is_the_body_of_a_main_test_reached_from_the_top_level() -> None:
    source = """\
import os
if __name__ == "__main__":
    main()
if "__main__" == __name__:
    other()
else:
    not_guarded()
try:
    if __name__ == "__main__":
        nested()
except ImportError:
    pass
def f():
    if __name__ == "__main__":
        inside_a_function()
if __name__ != "__main__":
    negated()
"""
    count = len(source.splitlines())
    assert [n for n in range(1, count + 1)
            if any(n in lines for lines in guarded_lines(source))] == [3, 5, 10]
