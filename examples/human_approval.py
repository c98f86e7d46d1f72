"""Human approval: a tool returns ``AskUser``, the run suspends, ``resume`` answers it.

The ``Suspended`` value is plain JSON: store it anywhere and resume later, in another process.
Run it with ``python -m examples.human_approval``.
"""

from __future__ import annotations

from toolvisor import Agent, AskUser, Suspended, function_tool
from toolvisor.testing import ScriptedModel, call, calls


@function_tool
def transfer(amount: int) -> AskUser | str:
    """Transfer money; large amounts need a human's approval.

    Args:
        amount: How many euros to transfer.
    """
    if amount > 1000:
        return AskUser(f"Approve a transfer of {amount} EUR?", ("approve", "deny"))
    return "transferred"


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
