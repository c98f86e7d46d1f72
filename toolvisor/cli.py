"""The command line: resolve completion keys and look at waits, from any process.

``python -m toolvisor.cli resolve --store runs.sqlite KEY --ok '{"status": "paid"}'`` delivers
the result of a ``Pending`` call; the run that waits on it continues in whichever process hosts
it. ``python -m toolvisor.cli waits --store runs.sqlite`` lists the open waits.
``python -m toolvisor.cli mcp serve module:tools`` serves tools over MCP (stdio; ``--http``
for streamable HTTP), each call supervised.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolvisor.contract import Tool
from toolvisor.durable import SqliteSessionStore
from toolvisor.mcp import serve

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
    mcp = commands.add_parser("mcp", help="serve tools over MCP").add_subparsers(
        dest="mcp_command", required=True).add_parser(
        "serve", help="serve tools to any MCP client, each call supervised")
    mcp.add_argument("tools", help="module:attribute naming a Tool or a list of Tools")
    mcp.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8000, help="HTTP port (0: any free one)")
    mcp.add_argument("--tool-timeout", type=float, default=30.0,
                     help="seconds a call may take unless its tool says (default 30)")
    mcp.add_argument("--name", default="toolvisor", help="the server's name")
    return parser


def _load_tools(spec: str) -> list[Tool]:
    module, _, attribute = spec.partition(":")
    if not module or not attribute:
        raise SystemExit(f"error: name the tools as module:attribute, got {spec!r}")
    found = getattr(importlib.import_module(module), attribute)
    tools = [found] if isinstance(found, Tool) else list(found)
    if not tools or not all(isinstance(t, Tool) for t in tools):
        raise SystemExit(f"error: {spec} must be a Tool or a non-empty list of Tools")
    return tools


def _serve(args: argparse.Namespace) -> int:
    def listening(url: str) -> None:
        print(f"serving MCP on {url}", flush=True)

    serve(_load_tools(args.tools), http=args.http, host=args.host, port=args.port,
          on_listening=listening, tool_timeout=args.tool_timeout, name=args.name)
    return EXIT_ACCEPTED


def _open_store(path: str) -> SqliteSessionStore:
    if not Path(path).is_file():
        raise SystemExit(f"error: no session store at {path!r}; pass the file the agent uses "
                         "(Agent(..., store=PATH))")
    return SqliteSessionStore(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "mcp":
        return _serve(args)
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
