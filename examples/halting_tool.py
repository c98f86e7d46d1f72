"""A tool that ends the whole run with ``Halt(reason, result)``.

Run it with ``python -m examples.halting_tool``.
"""

from __future__ import annotations

from toolvisor import Agent, Halt, Halted, function_tool
from toolvisor.testing import ScriptedModel, call, calls


@function_tool
def submit_answer(answer: int) -> Halt:
    """Submit the final answer: the run ends here, with it as the result."""
    return Halt("answer_submitted", {"answer": answer})


def main() -> None:
    model = ScriptedModel([calls(call("submit_answer", {"answer": 42}))])
    with Agent(model, [submit_answer]) as agent:
        outcome = agent.run("What is six times seven?")
    assert isinstance(outcome, Halted)
    print(f"Halted: reason={outcome.reason!r} result={outcome.result}")


if __name__ == "__main__":
    main()
