"""A host that tests/isolation/test_host_death.py SIGKILLs while calls hang in its children.

``python -m tests.programs.orphan_host KIND...`` runs, for each ``KIND``, one call that never ends
in a child of that kind, all at once: ``forkserver`` or ``spawn`` (a ``process`` worker started
that way), ``sandbox`` (a bubblewrap sandbox), ``mcp`` (an MCP stdio server,
``tests.programs.mcp_server``, stuck in its ``spin`` tool). It prints ``{"hung": KIND}`` once that
call runs in its child; for ``mcp`` the server prints that line itself, on its stderr, which is
this host's stdout.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tests.support.orphan_handlers import spin
from toolvisor import Agent, CallContext, Timeouts, Tool
from toolvisor.executor import ToolRunner
from toolvisor.mcp import McpToolProvider
from toolvisor.testing import ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parents[2]


class Told:
    """A call's progress sink: its first report says the handler runs in its child."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def report(self, message: str, fraction: float | None) -> None:
        print(json.dumps({"hung": self.kind}), flush=True)

    def heartbeat(self) -> None:
        """Heartbeats say nothing here."""


def main(kinds: list[str]) -> None:
    calls_: list[Callable[[], object]] = []
    with ExitStack() as stack:
        runners = {mp: stack.enter_context(ToolRunner(process_workers=1, mp_context=mp))
                   for mp in ("forkserver", "spawn")}
        for kind in kinds:
            if kind == "mcp":
                server = McpToolProvider.stdio(
                    "local", [sys.executable, "-m", "tests.programs.mcp_server"], cwd=str(ROOT),
                    errlog=sys.stdout)
                model = ScriptedModel([calls(call("spin", {}, id="c1")), "done"])
                agent = stack.enter_context(Agent(model, [server], timeouts=Timeouts(tool=600)))
                calls_.append(lambda agent=agent: agent.run("go"))
                continue
            isolation = "sandbox" if kind == "sandbox" else "process"
            runner = runners["spawn" if kind == "spawn" else "forkserver"]
            tool = Tool("spin", handler=spin, isolation=isolation, timeout=600)
            calls_.append(lambda runner=runner, tool=tool, kind=kind: runner.run(
                tool, {}, CallContext(progress=Told(kind))))
        threads = [threading.Thread(target=run, daemon=True) for run in calls_]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()  # for ever: the test kills this host


if __name__ == "__main__":
    main(sys.argv[1:])
