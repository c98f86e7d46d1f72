"""Workers on one PostgreSQL store: throughput, failover, and a soak with ``kill -9``.

``python -m bench.workers`` starts a PostgreSQL server of its own (the ``pgserver`` wheel, in a
temporary folder, deleted at the end) and measures, with real worker processes
(``python -m toolvisor.cli worker``, the agent of ``bench._worker_agents``):

- **throughput**: ``--runs`` (1,000) runs of the model-half workload submitted (the submits'
  own rate is reported), then drained by one, then two workers (the same total concurrency):
  runs per second from the first claim to the last run finished;
- **failover**: a worker holding ``--held`` (20) runs mid-call is SIGKILLed; the time from the
  kill to another worker (ready and idle) claiming the first and the last of them, with a lease
  ttl of ``--ttl`` (5 s);
- **deep failover**: the same with a deep queue: a worker holding ``--deep-held`` (5) runs
  mid-call is SIGKILLed while ``--deep-queued`` (200) new runs wait and another worker
  (``--deep-concurrency``, 4) drains them; the time from the kill to that worker claiming the
  first and the last of the dead worker's runs (on the same machine: no ttl to wait for);
- **soak**: ``--soak-runs`` (600) runs of a batch of ``plain`` (not retryable), ``retryable``
  and ``journaled`` calls, three workers (8 runs each at once, lease ttl ``--soak-ttl``, 2 s),
  one of them SIGKILLed and replaced every
  ``--kill-every`` (1.0 s) until ``--kills`` (10) kills; then every run must complete
  (0 lost) with no ``plain`` call or journaled step run twice.

Exit status 0 when the soak's checks pass. Timings depend on the machine's load: print
``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._worker_agents import make_agent
from toolvisor.durable import open_store

ROOT = Path(__file__).resolve().parent.parent
FACTORY = "bench._worker_agents:make_agent"
WAIT = 600.0


class Worker:
    """One worker process whose stdout lines are stamped (monotonic) as they come."""

    changed = threading.Condition()  # every worker's lines

    def __init__(self, url: str, *, concurrency: int, env: dict[str, str] | None = None,
                 poll: float = 0.5) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolvisor.cli", "worker", "--store", url, FACTORY,
             "--concurrency", str(concurrency), "--poll", str(poll), "--grace", "5"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with Worker.changed:
                self.lines.append((time.monotonic(), line.strip()))
                Worker.changed.notify_all()

    def said(self, word: str) -> list[tuple[float, str]]:
        with Worker.changed:
            return [(at, line.split()[1]) for at, line in self.lines
                    if line.startswith(word + " ")]

    def ready(self) -> Worker:
        until(lambda: any(line.endswith(" ready") for _, line in self.lines))
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait()
        self._reader.join()
        if self.process.stdout is not None:
            self.process.stdout.close()


def until(condition: Callable[[], bool]) -> None:
    with Worker.changed:
        if not Worker.changed.wait_for(condition, WAIT):
            raise TimeoutError("the workers never got there")


def finished(workers: list[Worker]) -> dict[str, float]:
    """When each run finished (its first ``finished`` line), by run id."""
    done: dict[str, float] = {}
    for worker in workers:
        for at, run_id in worker.said("finished"):
            done.setdefault(run_id, at)
    return done


def throughput(url: str, runs: int, count: int) -> dict[str, Any]:
    """Submit ``runs`` runs, then start ``count`` workers (the same total concurrency): runs
    per second from the first claim to the last run finished."""
    with open_store(url) as store, make_agent(store) as agent:
        started = time.monotonic()
        ids = [agent.submit("half") for _ in range(runs)]
        submitted = time.monotonic()
    workers = [Worker(url, concurrency=runs // count) for _ in range(count)]
    until(lambda: len(finished(workers)) >= runs)
    first = min(at for worker in workers for at, _ in worker.said("claimed"))
    ended = max(finished(workers).values())
    per_worker = [len(w.said("finished")) for w in workers]
    for worker in workers:
        worker.stop()
    assert set(finished(workers)) == set(ids)
    return {"workers": count, "runs": runs, "seconds": round(ended - first, 2),
            "runs_per_s": round(runs / (ended - first), 1),
            "submit_per_s": round(runs / (submitted - started), 1), "per_worker": per_worker}


def one_run(url: str) -> float:
    worker = Worker(url, concurrency=1).ready()
    with open_store(url) as store, make_agent(store) as agent:
        started = time.monotonic()
        run_id = agent.submit("half")
        until(lambda: run_id in finished([worker]))
    seconds = finished([worker])[run_id] - started
    worker.stop()
    return round(seconds, 3)


def failover(url: str, held: int, ttl: float) -> dict[str, Any]:
    env = {"BENCH_LEASE_TTL": str(ttl)}
    holder = Worker(url, concurrency=held, env={**env, "BENCH_HOLD": "1"}).ready()
    with open_store(url) as store, make_agent(store) as agent:
        ids = {agent.submit(f"hold h{n}") for n in range(held)}
        until(lambda: sum(line.startswith("holding ") for _, line in holder.lines) >= held)
    spare = Worker(url, concurrency=held, env=env, poll=0.05).ready()
    killed = time.monotonic()
    holder.stop(signal.SIGKILL)
    until(lambda: len(finished([spare])) >= held)
    claimed = sorted(at for at, run_id in spare.said("claimed") if run_id in ids)
    spare.stop()
    return {"runs": held, "ttl": ttl, "first_s": round(claimed[0] - killed, 2),
            "last_s": round(claimed[-1] - killed, 2),
            "finished_s": round(max(finished([spare]).values()) - killed, 2)}


def deep_failover(url: str, held: int, queued: int, concurrency: int) -> dict[str, Any]:
    """A worker holding ``held`` runs is SIGKILLed while ``queued`` new runs wait and another
    worker drains them: how long the dead worker's runs waited behind the queue."""
    with open_store(url) as store, make_agent(store) as agent:
        ids = {agent.submit(f"hold d{n}") for n in range(held)}  # the oldest: claimed first,
        backlog = {agent.submit("half") for _ in range(queued)}  # then updated after these
    holder = Worker(url, concurrency=held, env={"BENCH_HOLD": "1"}).ready()
    until(lambda: sum(line.startswith("holding ") for _, line in holder.lines) >= held)
    spare = Worker(url, concurrency=concurrency, poll=0.05).ready()
    until(lambda: len(spare.said("claimed")) >= concurrency)  # busy with the queue
    killed = time.monotonic()
    holder.stop(signal.SIGKILL)
    until(lambda: ids <= set(finished([spare])))
    claimed = sorted(at for at, run_id in spare.said("claimed") if run_id in ids)
    behind = sum(at <= claimed[-1] and run_id in backlog for at, run_id in spare.said("claimed"))
    spare.stop()
    return {"runs": held, "queued": queued, "concurrency": concurrency,
            "first_s": round(claimed[0] - killed, 2), "last_s": round(claimed[-1] - killed, 2),
            "queued_claimed_before_last": behind}


def soak(url: str, runs: int, kills: int, every: float, ttl: float, seed: int) -> dict[str, Any]:
    pick = random.Random(seed)
    log = Path(tempfile.mkdtemp()) / "effects.log"
    env = {"BENCH_LEASE_TTL": str(ttl), "BENCH_LOG": str(log)}
    live = [Worker(url, concurrency=8, env=env, poll=0.1).ready() for _ in range(3)]
    dead: list[Worker] = []
    with open_store(url) as store, make_agent(store) as agent:
        ids = [agent.submit(f"soak s{n}") for n in range(runs)]
        started = time.monotonic()
        while len(dead) < kills and len(store.runs(status="completed")) < runs:
            time.sleep(every)  # the soak's pace: a kill every so often, whatever is running
            victim = live.pop(pick.randrange(len(live)))
            victim.stop(signal.SIGKILL)
            dead.append(victim)
            live.append(Worker(url, concurrency=8, env=env, poll=0.1).ready())
        # a worker killed after a run's last checkpoint never printed its line: ask the store
        while len(store.runs(status="completed")) < runs and time.monotonic() - started < WAIT:
            time.sleep(0.2)
        seconds = time.monotonic() - started
        statuses = Counter(store.get_run(run_id).status for run_id in ids)  # type: ignore[union-attr]
        interrupted = sum("interrupted" in (store.latest_checkpoint(run_id).data)  # type: ignore[union-attr]
                          for run_id in ids)
    for worker in live:
        worker.stop()
    effects = Counter(log.read_text().split("\n")[:-1])
    twice = {line: n for line, n in effects.items()
             if n > 1 and not line.startswith("retryable ")}
    return {"runs": runs, "kills": len(dead), "seconds": round(seconds, 1),
            "completed": statuses.get("completed", 0), "lost": runs - statuses.get("completed", 0),
            "statuses": dict(statuses), "plain_interrupted": interrupted,
            "retryable_rerun": sum(n - 1 for line, n in effects.items()
                                   if line.startswith("retryable ")),
            "non_retryable_twice": len(twice)}


def uptime() -> str:
    return subprocess.run(["uptime"], check=False, capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--held", type=int, default=20)
    parser.add_argument("--ttl", type=float, default=5.0)
    parser.add_argument("--deep-held", type=int, default=5)
    parser.add_argument("--deep-queued", type=int, default=200)
    parser.add_argument("--deep-concurrency", type=int, default=4)
    parser.add_argument("--soak-runs", type=int, default=600)
    parser.add_argument("--soak-ttl", type=float, default=2.0)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--kill-every", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("throughput", "failover", "deep", "soak"), default=None)
    args = parser.parse_args(argv)
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import pgserver  # noqa: PLC0415 (a dev dependency, for this bench only)

        server: Any = pgserver.get_server(Path(tempfile.mkdtemp()), cleanup_mode="delete")
    schemas = iter(range(1, 100))

    def fresh() -> str:
        schema = f"bench_{next(schemas)}"
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server.get_uri(), autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        return f"{server.get_uri()}&options=-csearch_path%3D{schema}"

    report: dict[str, Any] = {"uptime": uptime()}
    try:
        if args.only in (None, "throughput"):
            report["one_run_s"] = one_run(fresh())
            report["throughput"] = [throughput(fresh(), args.runs, n) for n in (1, 2)]
        if args.only in (None, "failover"):
            report["failover"] = failover(fresh(), args.held, args.ttl)
        if args.only in (None, "deep"):
            report["deep_failover"] = deep_failover(fresh(), args.deep_held, args.deep_queued,
                                                    args.deep_concurrency)
        if args.only in (None, "soak"):
            report["soak"] = soak(fresh(), args.soak_runs, args.kills, args.kill_every,
                                  args.soak_ttl, args.seed)
    finally:
        server.cleanup()
    report["uptime_after"] = uptime()
    print(json.dumps(report, indent=2))
    checks = report.get("soak", {"lost": 0, "non_retryable_twice": 0})
    return 0 if checks["lost"] == 0 and checks["non_retryable_twice"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
