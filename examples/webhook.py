"""A webhook-style tool: the call parks on a completion key, another process resolves it.

The tool asks a (pretend) payment provider to charge a card and to call back when done; it
hands the provider its completion key and returns ``Pending``. The run suspends. A separate
process, the provider's webhook receiver, resolves the key from the command line:

    python -m toolvisor.cli resolve --store runs.sqlite KEY --ok '{"status": "paid"}'

and the run continues. The store is one SQLite file; had this process died while waiting,
``Agent(..., store=path).resume_run(run_id)`` would pick the run up in a new one.
Run it with ``python -m examples.webhook``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from toolvisor import Agent, CallContext, Completed, Pending, Suspended, ToolCall, function_tool
from toolvisor.testing import ScriptedModel, call, calls

OUTBOX: list[dict[str, Any]] = []  # what we "sent" to the payment provider


def cancel_charge(charge: ToolCall, key: str) -> None:
    """Called if the run is cancelled while the charge is pending."""
    OUTBOX.append({"cancel": charge.arguments, "callback": key})


@function_tool(on_cancel=cancel_charge)
def charge_card(amount: int, ctx: CallContext) -> Pending:
    """Charge a card; the provider confirms later through a webhook."""
    key = ctx.completion_key()
    # Journaled: a restarted run does not send the request twice.
    ctx.durable_effects().run_json(
        "request_charge", {"amount": amount, "callback": key}, OUTBOX.append)
    return Pending(deadline=300, on_timeout="error_as_result", on_cancel="cancel_external_work")


def webhook_receiver(store: Path, key: str, body: dict[str, Any]) -> str:
    """The provider's callback, as a separate process would deliver it."""
    done = subprocess.run(
        [sys.executable, "-m", "toolvisor.cli", "resolve", "--store", str(store), key,
         "--ok", json.dumps(body)],
        capture_output=True, text=True, check=False, timeout=60)
    return done.stdout.strip()


def main() -> None:
    model = ScriptedModel([calls(call("charge_card", {"amount": 42})),
                           "The card was charged: 42 EUR, status paid."])
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.sqlite"
        with Agent(model, [charge_card], store=store) as agent:
            first = agent.run("Charge 42 EUR")
            assert isinstance(first, Suspended) and first.run_id is not None
            (key,) = first.keys.values()
            print(f"suspended: run {first.run_id} waits on {len(first.keys)} key(s)")
            print(f"provider got: {OUTBOX[-1]['amount']} EUR, callback key {key[:16]}...")
            print("webhook receiver (another process):",
                  webhook_receiver(store, key, {"status": "paid"}))
            outcome = agent.resume_run(first.run_id, wait_for=60)
    assert isinstance(outcome, Completed)
    print(f"{type(outcome).__name__}: {outcome.text}")


if __name__ == "__main__":
    main()
