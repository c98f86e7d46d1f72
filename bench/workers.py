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
  ``--kill-every`` (1.0 s) until ``--kills`` (10) kills, and the PostgreSQL server stopped
  and started again ``--restarts`` (2) times in between, ``--down`` (3 s) each (the time from
  its return to a run finished, to every live worker claiming again, to the finishing rate
  back to 80% of what it was, and to every run that was mid-call done); then every run must
  complete (0 lost) with no ``plain`` call or journaled step run twice, and no worker may have
  exited.

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
from typing import Any, ClassVar

from bench._worker_agents import make_agent
from toolvisor.durable import StoreUnavailableError, open_store

ROOT = Path(__file__).resolve().parent.parent
FACTORY = "bench._worker_agents:make_agent"
WAIT = 600.0


class Worker:
    """One worker process whose stdout lines are stamped (monotonic) as they come."""

    changed = threading.Condition()  # every worker's lines
    every: ClassVar[list[Worker]] = []  # every worker started, in order (the bench's main thread's)

    def __init__(self, url: str, *, concurrency: int, env: dict[str, str] | None = None,
                 poll: float = 0.5) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolvisor.cli", "worker", "--store", url, FACTORY,
             "--concurrency", str(concurrency), "--poll", str(poll), "--grace", "5"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: list[tuple[float, str]] = []
        self.ended = float("inf")  # when it was stopped (monotonic)
        Worker.every.append(self)
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
        self.ended = min(self.ended, time.monotonic())
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


def soak(url: str, server: Any, runs: int, kills: int, every: float, ttl: float, seed: int,
         restarts: int, down: float) -> dict[str, Any]:
    pick = random.Random(seed)
    log = Path(tempfile.mkdtemp()) / "effects.log"
    env = {"BENCH_LEASE_TTL": str(ttl), "BENCH_LOG": str(log)}
    live = [Worker(url, concurrency=8, env=env, poll=0.1).ready() for _ in range(3)]
    dead: list[Worker] = []
    # the server restarts after these kills, in the soak's first half (while runs are left)
    restart_after = {max(1, round((n + 1) * kills / (2 * restarts + 1)))
                     for n in range(restarts)}
    outages: list[dict[str, Any]] = []
    with open_store(url) as store, make_agent(store) as agent:
        ids = [agent.submit(f"soak s{n}") for n in range(runs)]
        started = time.monotonic()
        while len(dead) < kills and completed(store) < runs:
            time.sleep(every)  # the soak's pace: a kill every so often, whatever is running
            victim = live.pop(pick.randrange(len(live)))
            victim.stop(signal.SIGKILL)
            dead.append(victim)
            live.append(Worker(url, concurrency=8, env=env, poll=0.1).ready())
            if len(dead) in restart_after:
                outages.append(restart(server, store, down))
        # a worker killed after a run's last checkpoint never printed its line: ask the store
        while completed(store) < runs and time.monotonic() - started < WAIT:
            time.sleep(0.2)
        seconds = time.monotonic() - started
        statuses = Counter(store.get_run(run_id).status for run_id in ids)  # type: ignore[union-attr]
        interrupted = sum("interrupted" in (store.latest_checkpoint(run_id).data)  # type: ignore[union-attr]
                          for run_id in ids)
        recovered = [recovery(outage, Worker.every, store) for outage in outages]
    exited = [w.process.returncode for w in live if w.process.poll() is not None]
    for worker in live:
        worker.stop()
    effects = Counter(log.read_text().split("\n")[:-1])
    twice = {line: n for line, n in effects.items()
             if n > 1 and not line.startswith("retryable ")}
    return {"runs": runs, "kills": len(dead), "restarts": recovered, "seconds": round(seconds, 1),
            "completed": statuses.get("completed", 0), "lost": runs - statuses.get("completed", 0),
            "statuses": dict(statuses), "plain_interrupted": interrupted,
            "retryable_rerun": sum(n - 1 for line, n in effects.items()
                                   if line.startswith("retryable ")),
            "non_retryable_twice": len(twice), "workers_exited": exited}


def completed(store: Any) -> int:
    """How many runs completed; the store may be coming back from a restart: ask again."""
    while True:
        try:
            return len(store.runs(status="completed"))
        except StoreUnavailableError:
            time.sleep(0.1)


def restart(server: Any, store: Any, down: float) -> dict[str, Any]:
    """Stop the PostgreSQL server (``pg_ctl stop -m fast``: every connection dropped), keep it
    down ``down`` seconds, start it again: when it went and came back (monotonic), and the
    runs mid-call when it went (leased), for :func:`recovery` to time once the soak is over."""
    leased = sorted(lease.run_id for lease in store.leases())
    stopped = time.monotonic()
    subprocess.run([str(Path(server_bin()) / "pg_ctl"), "-D", str(server.pgdata), "-w", "-m",
                    "fast", "stop"], check=True, capture_output=True, user=server.system_user)
    time.sleep(down)  # the outage itself
    server.ensure_postgres_running()
    return {"stopped": stopped, "back": time.monotonic(), "back_at": time.time(),
            "leased": leased, "workers": len(Worker.every)}


def recovery(outage: dict[str, Any], workers: list[Worker], store: Any) -> dict[str, Any]:
    """From the workers' stamped lines, the time from the server's return to: the first run
    finished, every worker that was live then claiming again (or killed), the finishing rate
    back to 80% of its rate in the 5 s before the server went (in 1 s windows), every run that was
    mid-call done (those are claimed in the store's order, oldest first, behind the queued
    runs older than them; when each completed is the store's ``updated_at``, as a worker
    killed right after a run's last checkpoint never printed its line)."""
    stopped, back = outage["stopped"], outage["back"]
    done = finished(workers)
    finishes = sorted(done.values())
    rate = sum(stopped - 5 <= at < stopped for at in finishes) / 5
    live = [w for w in workers[:outage["workers"]] if w.ended > back]  # when it came back
    claims = [min((at for at, _ in w.said("claimed") if at >= back), default=w.ended)
              for w in live]  # one killed before its first claim counts as it dies
    if not any(at >= back for at in finishes):
        return {"down_s": round(back - stopped, 2), "every_run_done_before": True}
    full = next((end - back for end in (back + 0.1 * n for n in range(10, 6000))
                 if sum(end - 1 <= at < end for at in finishes) >= 0.8 * rate), None)
    mid_call = [store.get_run(run_id).updated_at for run_id in outage["leased"]]
    return {"down_s": round(back - stopped, 2),
            "first_finished_s": round(min(at for at in finishes if at >= back) - back, 2),
            "every_worker_claiming_s": round(max(claims) - back, 2),
            "rate_before_per_s": rate,
            "back_to_80pct_rate_s": None if full is None else round(full, 1),
            "mid_call_runs": len(mid_call),
            "mid_call_runs_done_s": round(max(mid_call, default=outage["back_at"])
                                          - outage["back_at"], 2)}


def server_bin() -> str:
    """The folder of the PostgreSQL programs the ``pgserver`` wheel ships (``pg_ctl``)."""
    import pgserver  # noqa: PLC0415 (a dev dependency, for this bench only)

    return str(Path(pgserver.__file__).parent / "pginstall" / "bin")


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
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--down", type=float, default=3.0)
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
            report["soak"] = soak(fresh(), server, args.soak_runs, args.kills, args.kill_every,
                                  args.soak_ttl, args.seed, args.restarts, args.down)
    finally:
        server.cleanup()
    report["uptime_after"] = uptime()
    print(json.dumps(report, indent=2))
    checks = report.get("soak", {"lost": 0, "non_retryable_twice": 0, "workers_exited": []})
    passed = checks["lost"] == 0 and checks["non_retryable_twice"] == 0 \
        and not checks["workers_exited"]
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
