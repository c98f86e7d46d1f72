"""Recovery after a SIGKILL, end to end: a host process is killed in the middle of a batch of
tool calls, the store's runs are listed from the shell, and a new process finishes the run.

Run it with ``python -m examples.crash_recovery``. It starts its own host
(``python -m examples.crash_recovery --host STORE``), waits until that host is inside
``charge_card``, kills it with SIGKILL, runs ``python -m toolvisor.cli runs --store STORE``
and resumes the run here. ``lookup_price`` had finished before the kill, so it is not run
again; ``charge_card`` was running, may have charged the card already and is not
``retryable``, so it is not run again either: it gets ``handler_exit`` (code ``interrupted``),
and the model reads that.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from examples._reader import until_the_reader_leaves
from toolvisor import Agent, CallContext, function_tool
from toolvisor.testing import ScriptedModel, call, calls

HOSTING = threading.Event()  # set in the host process only: there charge_card never returns


@function_tool(retryable=True)
def lookup_price(item: str) -> float:
    """The price of an item (read only: safe to run again).

    Args:
        item: What to price.
    """
    return 12.5


@function_tool
def charge_card(amount: float, ctx: CallContext) -> str:
    """Charge the customer's card (not safe to run twice).

    Args:
        amount: How much to charge, in EUR.
    """
    if HOSTING.is_set():
        print(f"charging in run {ctx.session_id}", flush=True)  # the parent kills us now
        threading.Event().wait()
    return "charged"


def agent(store: Path) -> Agent:
    """The same agent in either process: one model script, the same tools, the same store."""
    model = ScriptedModel([
        calls(call("lookup_price", {"item": "book"}, id="p")),
        calls(call("charge_card", {"amount": 12.5}, id="c")),
        "The book costs 12.5 EUR. The charge was interrupted: check the card before retrying.",
    ])
    return Agent(model, [lookup_price, charge_card], store=store)


def host(store: Path) -> None:
    """The process that gets killed, inside ``charge_card``."""
    HOSTING.set()
    with agent(store) as a:
        a.run("Buy the book")


def main() -> None:
    store = Path(tempfile.mkdtemp()) / "runs.sqlite"
    with subprocess.Popen([sys.executable, "-m", "examples.crash_recovery", "--host",
                           str(store)], stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("charging in run "), line
        run_id = line.split()[-1]
        child.send_signal(signal.SIGKILL)
    print(f"host killed (exit {child.returncode}) while charge_card ran in run {run_id}")
    sys.stdout.flush()  # the CLI writes to the same stdout
    subprocess.run([sys.executable, "-m", "toolvisor.cli", "runs", "--store", str(store)],
                   check=False)
    with agent(store) as a:
        outcome = a.resume_run(run_id)
    print(f"{outcome.status}: {outcome.text}")
    for message in outcome.messages:
        if message.role == "tool":
            print(f"  {message.name}: {message.content[:100]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", type=Path, help="be the host process, on this store")
    arguments = parser.parse_args()
    if arguments.host is not None:
        host(arguments.host)
    else:
        until_the_reader_leaves(main)
