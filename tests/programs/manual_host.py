"""The first half of the manual-tool durable test, run in a subprocess: a run whose batch
mixes a manual and a handled tool suspends, and its ``Suspended`` is printed as JSON.

``python -m tests.programs.manual_host STORE``; the test resumes the run in its own process.
"""

from __future__ import annotations

import sys

from toolvisor import Agent, Tool, function_tool
from toolvisor.testing import ScriptedModel, call, calls

PICK_SCHEMA = {"type": "object", "required": ["path"],
               "properties": {"path": {"type": "string"}}, "additionalProperties": False}
pick_file = Tool(name="pick_file", description="Ask the user's browser for a file.",
                 input_schema=PICK_SCHEMA, manual=True)


@function_tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


TOOLS = [pick_file, word_count]
BATCH = calls(call("pick_file", {"path": "~/report.pdf"}, id="manual-1"),
              call("word_count", {"text": "three small words"}, id="handled-1"))
SCRIPT = [BATCH, "summarised"]  # the run's script; its process asks only for the first turn


def main(store: str) -> None:
    with Agent(ScriptedModel(SCRIPT), TOOLS, store=store) as agent:
        outcome = agent.run("summarise my report")
    sys.stdout.write(outcome.model_dump_json() + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
