"""The command line, ``toolvisor`` (or ``python -m toolvisor.cli``, the same commands): list a
store's runs, resolve completion keys, look at waits, serve tools over MCP, drive runs.

``toolvisor runs --store runs.sqlite`` lists the runs, newest first, as a tree
(each child session indented under the run whose call started it): id, agent, status, age,
the host driving it (``gone`` when its process died: resume it), its background processes (how
many, how many still running, how many detached: they outlive the run), the calls waiting on
completion keys (``--json``: one object a line, newest first, with the agent, the parent run,
the keys and each process's handle, name, status and whether it is detached).
``toolvisor resolve --store runs.sqlite KEY --ok '{"status": "paid"}'`` delivers
the result of a ``Pending`` call; the run that waits on it continues in whichever process hosts
it. ``toolvisor waits --store runs.sqlite`` lists the open waits.
``toolvisor mcp serve module:tools`` serves tools over MCP (stdio; ``--http``
for streamable HTTP), each call supervised. ``toolvisor worker --store
runs.sqlite app:make_agent`` claims the store's runnable runs and drives them until
``SIGTERM`` (one line per run: ``claimed``, ``finished``, ``waiting``, ``released``,
``lost``); it exits 1 once its store stayed unreachable for ``--reconnect-for`` seconds
(60). ``--store`` is a SQLite file's path or a ``postgresql://`` URL. A command that only
reads a store never creates one, and writes nothing to it (it reads a read-only store). A store
that cannot be used (full, read-only, damaged) is named in one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from toolvisor.contract import Tool
from toolvisor.durable import (
    Lease,
    PostgresRunStore,
    RunRecord,
    RunStore,
    SqliteRunStore,
    StoreError,
    Wait,
    holder_gone,
    open_store,
    process_records,
)
from toolvisor.mcp import serve
from toolvisor.worker import POLL, RECONNECT_FOR, Worker, agent_factory

EXIT_ACCEPTED = 0
EXIT_NOT_ACCEPTED = 1  # already resolved, or unknown / revoked / tampered
EXIT_USAGE = 2
EXIT_PIPE_CLOSED = 141  # what a shell reports for a writer ended by SIGPIPE (128 + 13)
_STORE_HELP = "the run store: its SQLite file, or a postgresql:// URL"


def _json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"not JSON ({exc.msg}); quote strings, e.g. --ok '\"done\"'") from exc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolvisor",
                                     description="toolvisor run store commands")
    commands = parser.add_subparsers(dest="command", required=True)
    resolve = commands.add_parser("resolve", help="deliver the result of a completion key")
    resolve.add_argument("--store", required=True, help=_STORE_HELP)
    resolve.add_argument("key", help="the completion key, whole, as the tool handed it out")
    value = resolve.add_mutually_exclusive_group(required=True)
    value.add_argument("--ok", type=_json_argument, default=argparse.SUPPRESS,
                       help="the call's result, as JSON")
    value.add_argument("--error", type=_json_argument, default=argparse.SUPPRESS,
                       help="the call's error, as JSON")
    runs = commands.add_parser(
        "runs", help="list the runs, newest first, child sessions under their parent: id, "
                     "agent, status, age, host, waiting calls")
    runs.add_argument("--store", required=True, help=_STORE_HELP)
    runs.add_argument("--status", default=None,
                      help="only runs with this status (running, suspended, completed, halted, "
                           "failed, cancelled)")
    runs.add_argument("--json", action="store_true",
                      help="one JSON object a line, with the agent, the parent run, timestamps "
                           "and the waiting keys")
    waits = commands.add_parser("waits", help="list the open waits (one JSON object a line)")
    waits.add_argument("--store", required=True, help=_STORE_HELP)
    waits.add_argument("--run", default=None, help="only the waits of this run id")
    worker = commands.add_parser(
        "worker", help="claim the store's runnable runs and drive them until SIGTERM")
    worker.add_argument("--store", required=True,
                        help=_STORE_HELP + " (created if missing)")
    worker.add_argument("factory", help="module:function that takes the store and returns "
                                        "the Agent (model, tools, policies) to drive runs with")
    worker.add_argument("--concurrency", type=int, default=16,
                        help="runs driven at once (default 16)")
    worker.add_argument("--poll", type=float, default=POLL,
                        help=f"seconds between looks for runs nobody announced (default {POLL})")
    worker.add_argument("--grace", type=float, default=30.0,
                        help="seconds SIGTERM gives the runs in flight to finish or wait, "
                             "before their leases are released (default 30)")
    worker.add_argument("--reconnect-for", type=float, default=RECONNECT_FOR,
                        help="seconds the store may stay unreachable (every claim failing) "
                             "before the worker exits 1, for its supervisor to restart it "
                             f"(default {RECONNECT_FOR:g})")
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


def _work(args: argparse.Namespace) -> int:
    """Drive runs until SIGTERM (or SIGINT): then finish or release them, and exit 0. A signal
    is heeded from the command's start: one that comes while the worker is being made is
    passed on to it once it is."""
    with _Stops() as stops:
        try:
            make_agent = agent_factory(args.factory)
        except (ValueError, ImportError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        with _store_to_work_on(args.store) as store:
            try:
                agent = make_agent(store)
                worker = Worker(agent, concurrency=args.concurrency, poll_interval=args.poll,
                                grace=args.grace, reconnect_for=args.reconnect_for,
                                on_event=_print_event)
            except (TypeError, ValueError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return EXIT_USAGE
            with agent:
                failed = stops.drive(worker)
    return EXIT_NOT_ACCEPTED if failed else EXIT_ACCEPTED


class _Stops:
    """SIGTERM and SIGINT while the worker command runs: each asks the worker to stop (one
    that comes before the worker is made is passed on to it as soon as it is).

    Python runs a signal's handler on the main thread, between two bytecodes, but the kernel
    may give the signal to any thread (to another one when several come at once): that thread
    only marks it, and a main thread blocked in a wait (a join) would never run the handler.
    So the main thread waits on the signal module's wake-up pipe (``signal.set_wakeup_fd``:
    written by whichever thread took the signal), which the driving thread also writes once
    the worker has ended. Everything here but :meth:`_ended` belongs to the main thread.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._worker: Worker | None = None
        self._asked = False
        self._done = threading.Event()
        self._wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {signum: signal.signal(signum, self._stop)
                          for signum in (signal.SIGTERM, signal.SIGINT)}

    def __enter__(self) -> _Stops:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            if handler is not None:  # None: one not set from Python, which stays ours
                signal.signal(signum, handler)
        signal.set_wakeup_fd(self._wakeup)
        os.close(self._read)
        os.close(self._write)

    def _stop(self, signum: int, frame: Any) -> None:
        self._asked = True
        if self._worker is not None:
            self._worker.stop()

    def drive(self, worker: Worker) -> list[BaseException]:
        """Run ``worker`` on a thread of its own until it ends (stopped by a signal, or
        failing); what ended it other than a stop."""
        self._worker = worker
        if self._asked:
            worker.stop()
        failed: list[BaseException] = []
        driving = threading.Thread(target=self._run, args=(worker, failed),
                                   name="toolvisor-worker")
        announcing = threading.Thread(target=_announce, args=(worker,),
                                      name="toolvisor-worker-ready")
        driving.start()
        announcing.start()
        while not self._done.is_set():
            os.read(self._read, 512)  # a signal's byte (its handler runs now), or the end
        driving.join()
        announcing.join()
        return failed

    def _run(self, worker: Worker, failed: list[BaseException]) -> None:
        """The driving thread: run ``worker``; what ends it other than a stop is printed and
        kept in ``failed``; then wake the main thread."""
        try:
            worker.run()
        except BaseException as exc:
            print(f"error: the worker stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed.append(exc)
        finally:
            self._ended()

    def _ended(self) -> None:
        self._done.set()
        os.write(self._write, b"\0")


def _announce(worker: Worker) -> None:
    """Say when the worker is ready: it listens to the store and made its first claim."""
    worker.ready.wait()
    _say(f"worker {os.getpid()} ready")


def _store_to_work_on(target: str) -> SqliteRunStore | PostgresRunStore:
    """The store a worker claims runs of (created if missing); a clear error (exit 2) if it
    cannot be opened."""
    try:
        return open_store(target)
    except (OSError, ValueError, ImportError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _print_event(what: str, run_id: str, detail: str) -> None:
    _say(f"{what} {run_id} {detail}".rstrip())


_SAYING = threading.Lock()  # the announcing thread and the worker's threads print lines


def _say(line: str) -> None:
    """Print one whole line of the worker's output: ``print`` writes a line and its newline
    apart, so two threads printing at once could join two lines into one."""
    with _SAYING:
        print(line, flush=True)


def _open_store(target: str, read_only: bool) -> SqliteRunStore | PostgresRunStore:
    """The store ``target`` names (a SQLite file or a PostgreSQL URL), for reading alone if
    ``read_only``; a clear error (exit 2) if there is none there, it cannot be reached or
    used: never a new one."""
    try:
        return open_store(target, create=False, read_only=read_only)
    except FileNotFoundError as exc:
        print(f"error: {exc}; pass the file the agent uses (Agent(..., store=PATH))",
              file=sys.stderr)
    except (ValueError, ConnectionError, ImportError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _print_lines(lines: Iterable[str]) -> int:
    """Print each line; a reader that stops early (``| head``) ends the output quietly."""
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        # Nothing more can be written: point stdout at nothing, so the interpreter's last
        # flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
    return EXIT_ACCEPTED


def _age(seconds: float) -> str:
    """``42s``, ``3m05s``, ``5h02m``, ``3d04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _host(lease: Lease | None, now: float) -> dict[str, Any] | None:
    """Who drives the run: ``None`` if nobody holds its lease. ``state`` is ``gone`` (its
    process died: any agent may resume the run at once), ``expired`` (any agent may take it
    over) or ``live``."""
    if lease is None:
        return None
    state = "gone" if holder_gone(lease.holder) else "expired" if lease.expires_at <= now \
        else "live"
    return {"holder": lease.holder, "expires_at": lease.expires_at, "state": state}


def _run_data(store: RunStore, run: RunRecord, now: float,
              host: dict[str, Any] | None, waits: list[Wait]) -> dict[str, Any]:
    return {"run_id": run.run_id, "agent": run.agent, "parent": run.parent_run_id,
            "status": run.status, "age": round(now - run.created_at, 3),
            "created_at": run.created_at, "updated_at": run.updated_at, "host": host,
            "processes": [record.info().to_dict()
                          for record in process_records(store, run.run_id).values()],
            "waiting": [{"call_id": w.call_id, "purpose": w.purpose, "key": w.key,
                         "deadline_at": w.deadline_at} for w in waits]}


def _processes_text(processes: list[dict[str, Any]]) -> str:
    """``-``, or ``3 (1 running, 1 detached)``: how many, how many run, how many detached."""
    if not processes:
        return "-"
    running = sum(p["status"] == "running" for p in processes)
    detached = sum(p["detached"] for p in processes)
    return f"{len(processes)} ({running} running, {detached} detached)"


def _run_lines(store: RunStore, status: str | None, as_json: bool) -> list[str]:
    """One line per run, newest first (a header first, unless ``as_json``)."""
    now = store.now()
    waits: dict[str, list[Wait]] = {}
    for wait in store.open_waits():
        waits.setdefault(wait.run_id, []).append(wait)
    leases = {lease.run_id: lease for lease in store.leases()}
    runs = sorted(store.runs(status=status), key=lambda r: (r.created_at, r.run_id),
                  reverse=True)
    data = [_run_data(store, run, now, _host(leases.get(run.run_id), now),
                      waits.get(run.run_id, [])) for run in runs]
    if as_json:
        return [json.dumps(item) for item in data]
    if not data:
        return ["no runs" if status is None else f"no runs with status {status!r}"]
    rows = [("RUN", "AGENT", "STATUS", "AGE", "HOST", "PROCESSES", "WAITING")] + [(
        _run_text(item, depth, listed), item["agent"] or "-", item["status"],
        _age(item["age"]), "-" if item["host"] is None else _holder_text(item["host"]),
        _processes_text(item["processes"]),
        ", ".join(w["call_id"] for w in item["waiting"]) or "-")
        for depth, item, listed in _tree(data)]
    last = len(rows[0]) - 1  # the last column is not padded
    widths = [max(len(row[i]) for row in rows) for i in range(last)]
    return ["  ".join([*(row[i].ljust(widths[i]) for i in range(last)), row[last]])
            for row in rows]


def _tree(data: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any], bool]]:
    """The runs in tree order: each listed run (newest first) followed by its children (newest
    first, one level deeper). Each with its depth and whether its parent is listed (a child
    whose parent is not, under ``--status``, is a root)."""
    listed = {item["run_id"] for item in data}
    children: dict[str, list[dict[str, Any]]] = {}
    roots = []
    for item in data:
        if item["parent"] in listed:
            children.setdefault(item["parent"], []).append(item)
        else:
            roots.append(item)
    ordered: list[tuple[int, dict[str, Any], bool]] = []
    seen: set[str] = set()
    stack = [(0, item) for item in reversed(roots)]
    while stack:
        depth, item = stack.pop()
        seen.add(item["run_id"])
        ordered.append((depth, item, item["parent"] in listed))
        stack.extend((depth + 1, child) for child in reversed(children.get(item["run_id"], []))
                     if child["run_id"] not in seen)
    ordered += [(0, item, True) for item in data if item["run_id"] not in seen]  # a cycle
    return ordered


def _run_text(item: dict[str, Any], depth: int, parent_listed: bool) -> str:
    """The run's id, indented under its parent; a child whose parent is not listed says
    whose it is."""
    if depth:
        return "  " * depth + "- " + str(item["run_id"])
    if item["parent"] is not None and not parent_listed:
        return f"{item['run_id']} (child of {item['parent']})"
    return str(item["run_id"])


def _holder_text(host: dict[str, Any]) -> str:
    """``machine:pid``, and ``(gone)`` or ``(expired)`` unless it holds the lease alive."""
    machine, _, rest = str(host["holder"]).partition(":")
    shown = f"{machine}:{rest.partition(':')[0]}"
    return shown if host["state"] == "live" else f"{shown} ({host['state']})"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "mcp":
        return _serve(args)
    if args.command == "worker":
        return _work(args)
    try:
        return _on_store(args)
    except StoreError as exc:  # met while reading or writing: a damaged page, a full disk
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _on_store(args: argparse.Namespace) -> int:
    """Run ``resolve``, ``runs`` or ``waits``; the two that only read open the store read-only."""
    with _open_store(args.store, read_only=args.command != "resolve") as store:
        if args.command == "resolve":
            given = {name: vars(args)[name] for name in ("ok", "error") if name in vars(args)}
            outcome = store.resolve(args.key, **given)
            print(outcome)
            return EXIT_ACCEPTED if outcome == "accepted" else EXIT_NOT_ACCEPTED
        if args.command == "runs":
            return _print_lines(_run_lines(store, args.status, args.json))
        return _print_lines(json.dumps({
            "key": wait.key, "run_id": wait.run_id, "call_id": wait.call_id,
            "deadline_at": wait.deadline_at, "on_timeout": wait.on_timeout,
            "on_cancel": wait.on_cancel}) for wait in store.open_waits(args.run))


if __name__ == "__main__":
    sys.exit(main())
