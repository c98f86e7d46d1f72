"""Human approval: a tool returns ``AskUser``, the run suspends, ``resume`` answers it.

The ``Suspended`` value is plain JSON: store it anywhere and resume later, in another process.
Run it with ``python -m examples.human_approval``.
"""

from __future__ import annotations

from typing import Any

from toolvisor import Agent, AskUser, Ok, Suspended, tool
from toolvisor.testing import ScriptedModel, call, calls


@tool
def transfer(arguments: dict[str, Any]) -> AskUser | Ok:
    """Transfer money; large amounts need a human's approval."""
    if arguments["amount"] > 1000:
        return AskUser(f"Approve a transfer of {arguments['amount']} EUR?", ("approve", "deny"))
    return Ok("transferred")


def main() -> None:
    model = ScriptedModel([calls(call("transfer", {"amount": 5000})), "The transfer was approved."])
    with Agent(model, [transfer]) as agent:
        first = agent.run("Send 5000 EUR to Bob")
        assert isinstance(first, Suspended)
        saved = first.model_dump_json()          # e.g. into a database, while a human decides
        print(f"suspended: {first.questions[0].question}")
        outcome = agent.resume(Suspended.model_validate_json(saved), "approve")
    print(f"{type(outcome).__name__}: {getattr(outcome, 'text', '')}")


if __name__ == "__main__":
    main()
