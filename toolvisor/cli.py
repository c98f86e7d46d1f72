"""The command line: resolve completion keys and look at waits, from any process.

``python -m toolvisor.cli resolve --store runs.sqlite KEY --ok '{"status": "paid"}'`` delivers
the result of a ``Pending`` call; the run that waits on it continues in whichever process hosts
it. ``python -m toolvisor.cli waits --store runs.sqlite`` lists the open waits.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolvisor.durable import SqliteSessionStore

EXIT_ACCEPTED = 0
EXIT_NOT_ACCEPTED = 1  # already resolved, or unknown / revoked / tampered
EXIT_USAGE = 2


def _json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"not JSON ({exc.msg}); quote strings, e.g. --ok '\"done\"'") from exc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolvisor.cli",
                                     description="toolvisor session store commands")
    commands = parser.add_subparsers(dest="command", required=True)
    resolve = commands.add_parser("resolve", help="deliver the result of a completion key")
    resolve.add_argument("--store", required=True, help="the session store's SQLite file")
    resolve.add_argument("key", help="the completion key, whole, as the tool handed it out")
    value = resolve.add_mutually_exclusive_group(required=True)
    value.add_argument("--ok", type=_json_argument, default=argparse.SUPPRESS,
                       help="the call's result, as JSON")
    value.add_argument("--error", type=_json_argument, default=argparse.SUPPRESS,
                       help="the call's error, as JSON")
    waits = commands.add_parser("waits", help="list the open waits (one JSON object a line)")
    waits.add_argument("--store", required=True, help="the session store's SQLite file")
    waits.add_argument("--run", default=None, help="only the waits of this run id")
    return parser


def _open_store(path: str) -> SqliteSessionStore:
    if not Path(path).is_file():
        raise SystemExit(f"error: no session store at {path!r}; pass the file the agent uses "
                         "(Agent(..., store=PATH))")
    return SqliteSessionStore(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    args = _parser().parse_args(argv)
    with _open_store(args.store) as store:
        if args.command == "resolve":
            given = {name: vars(args)[name] for name in ("ok", "error") if name in vars(args)}
            outcome = store.resolve(args.key, **given)
            print(outcome)
            return EXIT_ACCEPTED if outcome == "accepted" else EXIT_NOT_ACCEPTED
        for wait in store.open_waits(args.run):
            print(json.dumps({"key": wait.key, "run_id": wait.run_id, "call_id": wait.call_id,
                              "deadline_at": wait.deadline_at, "on_timeout": wait.on_timeout,
                              "on_cancel": wait.on_cancel}))
        return EXIT_ACCEPTED


if __name__ == "__main__":
    sys.exit(main())
