"""A program that logs toolvisor's events on the console (stderr), whose reader goes away.

``python -m tests.programs.chatty_host``: one run while the reader still reads stderr; then, once a
line on stdin says the reader closed its end (as ``| head -3`` does), three more runs whose
events find the pipe closed. It prints one JSON line on stdout (the outcomes and the count of
dropped events) and ends by itself.
"""

from __future__ import annotations

import json
import sys

from tests.support import handlers as h
from toolvisor import Agent, Tool, configure_logging, dropped_events
from toolvisor.testing import ScriptedModel, call, calls

TOOLS = [Tool(name="echo", handler=h.ok_echo), Tool(name="hello", handler=h.async_ok)]


def run_once() -> str:
    model = ScriptedModel([calls(call("echo", {"a": 1}), call("hello", {})), "done"])
    with Agent(model, TOOLS) as agent:
        return type(agent.run("go")).__name__


def main() -> None:
    configure_logging("console")
    outcomes = [run_once()]
    sys.stdin.readline()  # the reader has closed its end of stderr
    outcomes += [run_once() for _ in range(3)]
    print(json.dumps({"outcomes": outcomes, "dropped": dropped_events()}), flush=True)


if __name__ == "__main__":
    main()
