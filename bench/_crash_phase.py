"""The soak's crash phase: hosts SIGKILLed mid-batch, their runs resumed by a fresh process.

Each crash draws (seeded) the plan of one host process (``bench._crash_host``): a mode and
1-3 runs, each one batch of 6-9 calls of the tools ``plain`` (not retryable), ``retryable``
and ``journaled``, with where each call is at the kill. The soak starts the host, reads its
stdout until it says it is ready (no sleeping), SIGKILLs it, and starts a fresh host that
resumes every run. Then it checks the side-effect log and every transcript: no call lost
(each call id has exactly one tool result), no non-retryable side effect run twice (a
``plain`` call interrupted mid-call gets ``handler_exit``/``interrupted`` and is not run
again; journaled steps run once), and ``retryable`` and ``journaled`` calls interrupted
mid-call are run again.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._crash_host import (
    FINAL_TEXT,
    KINDS,
    CrashCall,
    CrashRun,
    Fate,
    HostPlan,
    Kind,
    ok_text,
)
from toolvisor.machine import Mode

ROOT = Path(__file__).resolve().parent.parent
HOST = [sys.executable, "-m", "bench._crash_host"]
STEPS = ("step-1", "step-2")
_TAIL = 2000


class HostFailed(Exception):
    """A host did not get to its kill, or the fresh one did not resume its runs."""


@dataclass
class CrashReport:
    """What the crash phase did and found. ``lost`` counts calls without exactly one tool
    result; ``twice`` non-retryable side effects (a ``plain`` execution, a journaled step)
    that ran more than once; ``rerun`` calls whose handler ran again after the resume."""

    crashes: int = 0
    runs: int = 0
    calls: int = 0
    fates: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    interrupted: int = 0
    rerun: int = 0
    calls_by_kind: Counter[str] = field(default_factory=Counter)
    executions: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    twice: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {self.executions[k]} for {self.calls_by_kind[k]} calls"
                          for k in KINDS)
        return [
            f"crash phase: {self.crashes} hosts SIGKILLed mid-batch, {self.runs} runs crashed "
            f"and resumed by a fresh process, {self.seconds:.1f} s",
            f"  calls {self.calls}: finished before the kill {self.fates['finish']}, mid-call "
            f"at the kill {self.fates['stuck']}, started after the resume "
            f"{self.fates['later']}; lost {self.lost}",
            f"  interrupted (handler_exit/interrupted, not run again) {self.interrupted}; "
            f"run again after the resume {self.rerun}",
            f"  handler executions: {kinds}; journaled steps {self.steps} for "
            f"{self.calls_by_kind['journaled']} calls",
            f"  non-retryable side effects run twice (plain executions, journaled steps): "
            f"{self.twice}",
        ]


def draw_plan(rng: random.Random, crash: int, mode: Mode, effects: str) -> HostPlan:
    """One host's runs: each kind at least twice per run, in a drawn order."""
    runs = []
    for number in range(rng.randint(1, 3)):
        kinds: list[Kind] = [*KINDS, *KINDS, *rng.choices(KINDS, k=rng.randint(0, 3))]
        rng.shuffle(kinds)
        runs.append(CrashRun(name=f"crash {crash} run {number}", calls=tuple(
            CrashCall(id=f"k{crash}.{number}.{i}", kind=kind, fate=fate)
            for i, (kind, fate) in enumerate(zip(kinds, _fates(rng, kinds, mode),
                                                 strict=True)))))
    return HostPlan(mode=mode, effects=effects, runs=tuple(runs))


def _fates(rng: random.Random, kinds: Sequence[Kind], mode: Mode) -> list[Fate]:
    """``sequential`` runs one call at a time, so the kill finds one mid-call, neither the
    first nor the last; in a parallel batch each kind's first call is mid-call and its second
    finished, the rest drawn."""
    if mode == "sequential":
        at = rng.randrange(1, len(kinds) - 1)
        return ["finish" if i < at else "stuck" if i == at else "later"
                for i in range(len(kinds))]
    seen: Counter[Kind] = Counter()
    fates: list[Fate] = []
    for kind in kinds:
        seen[kind] += 1
        fates.append("stuck" if seen[kind] == 1 else "finish" if seen[kind] == 2
                     else rng.choice(("stuck", "finish")))
    return fates


def lines_at_kill(planned: CrashCall) -> Counter[str]:
    """The side-effect lines a call has written when its host is killed."""
    if planned.fate == "later":
        return Counter()
    lines = Counter({"exec": 1})
    if planned.kind == "journaled":
        lines.update({"step-1": 1, "step-2": int(planned.fate == "finish")})
    return lines


def lines_at_end(planned: CrashCall) -> Counter[str]:
    """The lines once the run is resumed: an interrupted call runs again unless ``plain``."""
    lines = Counter({"exec": 2 if planned.fate == "stuck" and planned.kind != "plain" else 1})
    if planned.kind == "journaled":
        lines.update(dict.fromkeys(STEPS, 1))
    return lines


def _interrupted(is_error: bool, content: str) -> bool:
    try:
        error = json.loads(content)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return (is_error and isinstance(error, dict) and error.get("reason") == "handler_exit"
            and error.get("code") == "interrupted")


def tally_run(run: CrashRun, at_kill: dict[str, Counter[str]], at_end: dict[str, Counter[str]],
              outcome: dict[str, Any], report: CrashReport) -> None:
    """Count one resumed run into ``report`` and record every problem with it."""
    report.runs += 1
    if (outcome["kind"], outcome["text"]) != ("completed", FINAL_TEXT):
        report.problems.append(f"{run.name} ended {outcome['kind']}: {outcome['text']!r}")
    results: dict[str, list[tuple[bool, str]]] = {}
    for call_id, is_error, content in outcome["results"]:
        results.setdefault(call_id, []).append((is_error, content))
    for stray in sorted(results.keys() - {c.id for c in run.calls}):
        report.problems.append(f"{run.name}: a result for call {stray}, never asked for")
    for planned in run.calls:
        what = f"{run.name}: call {planned.id} ({planned.kind}, {planned.fate} at the kill)"
        report.calls += 1
        report.fates[planned.fate] += 1
        report.calls_by_kind[planned.kind] += 1
        got = results.get(planned.id, [])
        if len(got) != 1:
            report.lost += 1
            report.problems.append(f"{what}: {len(got)} tool results, expected 1")
        else:
            interrupted = _interrupted(*got[0])
            report.interrupted += interrupted
            expect_interrupted = planned.kind == "plain" and planned.fate == "stuck"
            if interrupted != expect_interrupted or (
                    not interrupted and got[0] != (False, ok_text(planned.id))):
                report.problems.append(f"{what}: result {got[0]}, expected "
                                       f"{'interrupted' if expect_interrupted else 'ok'}")
        lines = at_end.get(planned.id, Counter())
        report.executions[planned.kind] += lines["exec"]
        report.rerun += lines["exec"] > 1
        report.steps += sum(lines[s] for s in STEPS)
        report.twice += (planned.kind == "plain" and lines["exec"] > 1) + sum(
            lines[s] > 1 for s in STEPS)
        killed = at_kill.get(planned.id, Counter())
        if killed != lines_at_kill(planned):
            report.problems.append(f"{what}: side effects at the kill {dict(killed)}, "
                                   f"expected {dict(lines_at_kill(planned))}")
        if lines != lines_at_end(planned):
            report.problems.append(f"{what}: side effects {dict(lines)}, expected "
                                   f"{dict(lines_at_end(planned))}")


def read_log(path: str) -> dict[str, Counter[str]]:
    """The side-effect lines written so far, by call id."""
    lines: dict[str, Counter[str]] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as log:
            for line in log:
                call_id, what = line.split()
                lines.setdefault(call_id, Counter())[what] += 1
    return lines


def _tail(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-_TAIL:] if path.exists() else ""


def _wait_ready(host: subprocess.Popen[bytes], timeout: float) -> dict[str, str]:
    """The host's ``ready`` line (run name -> run id), read as it comes, within ``timeout``."""
    assert host.stdout is not None
    fd = host.stdout.fileno()
    deadline = time.monotonic() + timeout
    pending, said = b"", []
    while True:
        line, newline, rest = pending.partition(b"\n")
        if newline:
            pending = rest
            data = json.loads(line)
            if "ready" in data:
                ready: dict[str, str] = data["ready"]
                return ready
            said.append(data)
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise HostFailed(f"the host was not ready within {timeout} s; it said {said}")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise HostFailed(f"the host ended before it was ready; it said {said}")
        pending += chunk


def _kill_mid_batch(plan_path: Path, store: Path, workdir: Path,
                    timeout: float) -> dict[str, str]:
    """Start the first host, SIGKILL it once ready; its run ids by run name."""
    stderr_path = workdir / "first.stderr"
    with open(stderr_path, "wb") as stderr, subprocess.Popen(
            [*HOST, "first", str(plan_path), str(store)], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=stderr, bufsize=0) as host:
        try:
            ready = _wait_ready(host, timeout)
        except HostFailed as exc:
            raise HostFailed(f"{exc}; stderr: {_tail(stderr_path)}") from None
        finally:
            host.kill()
            host.wait()
    if host.returncode != -signal.SIGKILL:
        raise HostFailed(f"the host exited with {host.returncode} before the kill")
    return ready


def _resume(plan_path: Path, store: Path, run_ids: list[str],
            timeout: float) -> list[dict[str, Any]]:
    """A fresh host resumes the runs; their outcomes, in order."""
    try:
        done = subprocess.run([*HOST, "resume", str(plan_path), str(store), *run_ids],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise HostFailed(f"the resuming host did not finish within {timeout} s") from None
    outcomes = [json.loads(line)["outcome"] for line in done.stdout.splitlines()]
    if done.returncode != 0 or len(outcomes) != len(run_ids):
        raise HostFailed(f"the resuming host exited with {done.returncode} after "
                         f"{len(outcomes)} of {len(run_ids)} outcomes; stderr: "
                         f"{done.stderr[-_TAIL:]}")
    return outcomes


def _one_crash(plan: HostPlan, workdir: Path, timeout: float, report: CrashReport) -> None:
    plan_path, store = workdir / "plan.json", workdir / "runs.sqlite"
    plan_path.write_text(plan.model_dump_json(), encoding="utf-8")
    ready = _kill_mid_batch(plan_path, store, workdir, timeout)
    report.crashes += 1
    at_kill = read_log(plan.effects)
    run_ids = [ready[run.name] for run in plan.runs]
    outcomes = _resume(plan_path, store, run_ids, timeout)
    at_end = read_log(plan.effects)
    for run, outcome in zip(plan.runs, outcomes, strict=True):
        tally_run(run, at_kill, at_end, outcome, report)


def run_crashes(crashes: int, seed: int, modes: Sequence[Mode], timeout: float) -> CrashReport:
    """``crashes`` hosts killed and resumed, going round ``modes``; never raises for a failed
    check (each is in ``CrashReport.problems``)."""
    report = CrashReport()
    rng = random.Random(f"crash:{seed}")
    started = time.monotonic()
    for crash in range(crashes):
        mode = modes[crash % len(modes)]
        with tempfile.TemporaryDirectory(prefix="toolvisor-crash-") as tmp:
            workdir = Path(tmp)
            plan = draw_plan(rng, crash, mode, str(workdir / "effects.log"))
            try:
                _one_crash(plan, workdir, timeout, report)
            except HostFailed as exc:
                report.problems.append(f"crash {crash} ({mode}): {exc}")
    report.seconds = time.monotonic() - started
    return report
