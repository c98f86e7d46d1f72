"""A ``python_exec`` tool: it runs the Python code the model wrote, in a bubblewrap sandbox.

The code runs as a child of the handler inside the sandbox, so its limits hold for it too
(memory, CPU seconds, file size, open files, processes), it sees no network, no secret of the
agent's environment and no file of the host but the interpreter and the libraries, and it
writes only in its scratch directory, which is gone after the call. What it printed comes
back to the model, with its exit code. Run it with ``python -m examples.sandbox``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from toolvisor import Agent, function_tool
from toolvisor.testing import ScriptedModel, call, calls

_KEEP = 4000  # characters of each stream the model is shown (the end of it)


@function_tool(isolation="sandbox", timeout=10, options={
    "memory": 512 << 20,       # bytes of address space, for the handler and the code
    "cpu_seconds": 5,          # then SIGXCPU
    "file_size": 16 << 20,     # bytes per file written
    "open_files": 64,
    "processes": 16,           # a fork storm stops there
    "scratch": 32 << 20,       # bytes of the working directory
})
def python_exec(code: str) -> dict[str, Any]:
    """Run a Python program and return its exit code and what it printed."""
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          check=False)
    return {"exit_code": done.returncode, "stdout": done.stdout[-_KEEP:],
            "stderr": done.stderr[-_KEEP:]}


def main() -> None:
    model = ScriptedModel([
        calls(call("python_exec", {"code": "print(sum(range(10)))"}),
              call("python_exec", {"code": "import os; print(os.environ.get('OPENAI_API_KEY'))"}),
              call("python_exec", {"code": "print(open('/etc/passwd').read())"})),
        "Done.",
    ])
    with Agent(model, [python_exec]) as agent:
        outcome = agent.run("Compute, then look around")
    for message in outcome.messages:
        if message.role == "tool":
            print(f"{message.tool_call_id}: {message.content}")


if __name__ == "__main__":
    main()
