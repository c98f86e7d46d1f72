"""The fault-injection soak: thousands of supervised tool calls, every failure accounted for.

Run: ``python -m bench.soak --calls 20000 --seed 1 --max-seconds 600`` (exit status 0 when every
check passed, 1 otherwise; the summary lists each problem).

One ``Agent`` per execution mode, each with the tools of every isolation (``thread``,
``process``, ``asyncio``; see ``bench._soak_handlers``), so a batch mixes isolations the way a
real model's would. Runs go round-robin over the agents, one run at a time. Each run is 1-7
tool turns and a final answer; each turn asks for 1-20 calls whose behaviour is drawn from a
seeded mix (the first turn of each agent asks for every isolation x behaviour once). The model
checks, in every request, the results of the batch before: each call id has exactly one tool
result, with the reason its behaviour implies. A policy function records every failure it is
shown and continues. At checkpoints the process's RSS, threads and descriptors are recorded;
after ``close()`` nothing may be left behind.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from bench._soak_handlers import (
    HANDLERS,
    ISOLATIONS,
    Isolation,
    reported_text,
    soak_tools,
    tool_name,
)
from toolvisor import Agent, Completed, InvalidArguments, ToolError
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.executor import OutputBudget, OutputProjection, RunnerStats, prepare_process_isolation
from toolvisor.machine import Continue, FailedCall, Mode
from toolvisor.testing import FunctionModel, LeakCheck, call, calls

MODES: tuple[Mode, ...] = ("parallel_batch_approval", "parallel_streaming", "sequential")

WEIGHTS: dict[str, int] = {
    "ok": 34, "huge": 4, "raise": 8, "exit": 6, "die": 3, "hang": 3, "garbage": 8,
    "reported": 8, "unencodable": 5, "invalid_args": 7, "unknown": 7,
}
"""The behaviour mix (relative weights; ``die`` is drawn for process isolation only)."""

EXPECTED: dict[str, str] = {
    "ok": "ok", "huge": "ok_truncated", "raise": "handler_raised", "exit": "handler_exit",
    "die": "handler_exit", "hang": "timeout", "garbage": "invalid_return",
    "reported": "reported", "unencodable": "encoding_failed",
    "invalid_args": "invalid_arguments", "unknown": "not_found",
}
"""What each behaviour must come back as: a ``ToolError`` reason, or how the result reads."""

MAX_TURNS = 8
FINAL_TEXT = "done"
_MAX_PROBLEMS_KEPT = 200
_MIB = 1024


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """What one soak does. ``rss_tolerance_kib`` bounds growth after warm-up (see
    :meth:`SoakReport.memory_verdict`)."""

    calls: int = 20_000
    seed: int = 1
    max_seconds: float = 600.0
    hang_timeout: float = 0.05
    budget_bytes: int = 4096
    max_batch: int = 20
    modes: tuple[Mode, ...] = MODES
    checkpoints: int = 10
    warmup_fraction: float = 0.2
    rss_tolerance_kib: int = 16 * _MIB
    run_timeout: float = 120.0


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One call the model asks for, and what its behaviour implies."""

    id: str
    isolation: Isolation
    behaviour: str

    @property
    def expected(self) -> str:
        return EXPECTED[self.behaviour]

    def tool_call(self) -> Any:
        if self.behaviour == "unknown":
            return call(f"{self.isolation}_missing", {"tag": self.id}, id=self.id)
        if self.behaviour == "invalid_args":
            return call(tool_name(self.isolation, "ok"), {"tag": 42}, id=self.id)
        return call(tool_name(self.isolation, self.behaviour), {"tag": self.id}, id=self.id)

    def policy_kind(self) -> str | None:
        """What the policy must be shown for this call (``None``: it must not be asked)."""
        if self.behaviour in ("ok", "huge"):
            return None
        if self.behaviour == "reported":
            return f"reported: {reported_text(self.id)!r}"
        return self.expected


def policy_kind(error: Any) -> str:
    """How the soak's policy records one failure it was shown."""
    if isinstance(error, ToolError):
        return error.reason
    if isinstance(error, InvalidArguments):
        return "invalid_arguments"
    return f"reported: {error!r}"


def check_result(planned: PlannedCall, message: ToolResultMessage, budget_bytes: int) -> str | None:
    """Why ``message`` is not the result ``planned`` must have, or ``None`` when it is."""
    text = message.content
    if planned.behaviour == "ok":
        good = not message.is_error and text == planned.id
    elif planned.behaviour == "huge":
        good = (not message.is_error and text.startswith(planned.id)
                and "bytes truncated" in text and len(text.encode()) <= budget_bytes)
    else:
        try:
            error = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            error = None
        if planned.behaviour == "reported":
            good = message.is_error and error == reported_text(planned.id)
        else:
            good = (message.is_error and isinstance(error, dict)
                    and error.get("reason") == planned.expected)
    if good:
        return None
    return (f"{planned.id} ({planned.isolation}/{planned.behaviour}): expected "
            f"{planned.expected}, got is_error={message.is_error} {text[:200]!r}")


class Ledger:
    """What the soak has seen: calls per expected reason, and every problem found.

    Written by whichever thread runs the current run's model and policy (the agent's
    orchestrator) and by the main thread between runs; runs never overlap, and ``Agent.run``
    returning orders the two.
    """

    def __init__(self) -> None:
        self.reasons: Counter[str] = Counter()
        self.by_isolation: Counter[tuple[str, str]] = Counter()
        self.problems: list[str] = []
        self.problem_count = 0

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < _MAX_PROBLEMS_KEPT:
            self.problems.append(text)


class SoakModel:
    """The model of one agent: plans each run's batches from a seeded RNG, and checks, in
    every request, the results of the batch it asked for before.

    A run's plan (``_issued``, ``_last_batch``, the turn and call budgets) is set by the main
    thread before the run and read back after it; during the run only the orchestrator's
    thread touches it (through ``respond``).
    """

    def __init__(self, mode: Mode, rng: random.Random, config: SoakConfig,
                 ledger: Ledger) -> None:
        self.mode = mode
        self._rng = rng
        self._config = config
        self._ledger = ledger
        self._run = 0
        self._covered = False
        self._turns_left = 0
        self._calls_left = 0
        self._issued: dict[str, PlannedCall] = {}
        self._last_batch: list[PlannedCall] = []
        self.policy_seen: dict[str, list[str]] = {}

    def start_run(self, calls_left: int) -> None:
        self._run += 1
        self._turns_left = self._rng.randint(1, MAX_TURNS - 1)
        self._calls_left = calls_left
        self._issued = {}
        self._last_batch = []
        self.policy_seen = {}

    @property
    def issued(self) -> dict[str, PlannedCall]:
        return self._issued

    def policy(self, failed: FailedCall, error: Any) -> Continue:
        """The agent's ``on_tool_error``: record the failure, let the model see it."""
        self.policy_seen.setdefault(failed.id, []).append(policy_kind(error))
        return Continue()

    def respond(self, request: ModelRequest) -> ModelResponse | str:
        self._check(request)
        if self._turns_left == 0 or self._calls_left == 0:
            return FINAL_TEXT
        self._turns_left -= 1
        batch = self._coverage_batch() if not self._covered else self._random_batch()
        self._covered = True
        self._calls_left -= len(batch)
        self._issued.update((p.id, p) for p in batch)
        self._last_batch = batch
        return calls(*(p.tool_call() for p in batch))

    def _check(self, request: ModelRequest) -> None:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        counts = Counter(m.tool_call_id for m in results)
        for call_id, count in counts.items():
            if call_id not in self._issued:
                self._ledger.problem(f"{self.mode}: a result for call id {call_id!r}, which "
                                     "was never asked for")
            elif count != 1:
                self._ledger.problem(f"{self.mode}: call {call_id} has {count} results")
        latest = {m.tool_call_id: m for m in results}
        for planned in self._last_batch:
            message = latest.get(planned.id)
            if message is None:
                self._ledger.problem(f"{self.mode}: call {planned.id} has no result in the "
                                     "next request")
                continue
            why = check_result(planned, message, self._config.budget_bytes)
            if why is not None:
                self._ledger.problem(f"{self.mode}: {why}")
        self._last_batch = []

    def _coverage_batch(self) -> list[PlannedCall]:
        behaviours = {iso: [*HANDLERS[iso], "invalid_args", "unknown"] for iso in ISOLATIONS}
        return [self._planned(iso, b) for iso in ISOLATIONS for b in behaviours[iso]]

    def _random_batch(self) -> list[PlannedCall]:
        size = min(self._rng.randint(1, self._config.max_batch), self._calls_left)
        batch = []
        for _ in range(size):
            isolation = self._rng.choice(ISOLATIONS)
            names = [b for b in WEIGHTS if b in HANDLERS[isolation]
                     or b in ("invalid_args", "unknown")]
            behaviour = self._rng.choices(names, [WEIGHTS[b] for b in names])[0]
            batch.append(self._planned(isolation, behaviour))
        return batch

    def _planned(self, isolation: Isolation, behaviour: str) -> PlannedCall:
        index = len(self._issued) + len(self._last_batch_ids)
        return PlannedCall(f"{self.mode[:3]}-r{self._run}-c{index}", isolation, behaviour)

    @property
    def _last_batch_ids(self) -> list[str]:
        return []


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The process after ``calls`` calls (after a ``gc.collect()``)."""

    calls: int
    seconds: float
    rss_kib: int
    threads: int
    fds: int


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/status has no VmRSS line (the soak needs Linux)")


def _fd_count() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))


def checkpoint(calls_done: int, started: float) -> Checkpoint:
    gc.collect()
    return Checkpoint(calls_done, time.monotonic() - started, _rss_kib(),
                      threading.active_count(), _fd_count())


@dataclass
class SoakReport:
    """Everything a soak measured and every problem it found."""

    config: SoakConfig
    calls: int = 0
    runs: int = 0
    wall_seconds: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)
    by_isolation: Counter[tuple[str, str]] = field(default_factory=Counter)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    runner_stats: dict[str, RunnerStats] = field(default_factory=dict)
    tool_call_children: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    leaks: list[str] = field(default_factory=list)

    @property
    def warmup(self) -> Checkpoint | None:
        """The first checkpoint past the warm-up share of the calls."""
        goal = self.config.warmup_fraction * self.config.calls
        return next((c for c in self.checkpoints if c.calls >= goal and c.calls > 0), None)

    def memory_verdict(self) -> tuple[bool | None, str]:
        """Flat means: no checkpoint after warm-up is more than ``rss_tolerance_kib`` above
        the warm-up RSS. ``None`` when there are too few checkpoints to tell."""
        warm = self.warmup
        later = [c for c in self.checkpoints if warm is not None and c.calls > warm.calls]
        if warm is None or not later:
            return None, "too few checkpoints after warm-up to judge memory"
        peak = max(c.rss_kib for c in later)
        growth = peak - warm.rss_kib
        end = later[-1].rss_kib - warm.rss_kib
        flat = growth <= self.config.rss_tolerance_kib
        return flat, (f"RSS at warm-up ({warm.calls} calls) {warm.rss_kib / _MIB:.1f} MiB, "
                      f"peak after {peak / _MIB:.1f} MiB (+{growth / _MIB:.1f}), end "
                      f"{later[-1].rss_kib / _MIB:.1f} MiB ({end / _MIB:+.1f}); tolerance "
                      f"+{self.config.rss_tolerance_kib / _MIB:.0f} MiB: "
                      f"{'flat' if flat else 'GROWING'}")

    @property
    def ok(self) -> bool:
        flat, _ = self.memory_verdict()
        return not self.problem_count and not self.leaks and flat is not False

    def summary(self) -> str:
        lines = [f"soak: {self.calls} calls in {self.runs} runs, seed {self.config.seed}, "
                 f"modes {', '.join(self.config.modes)}",
                 f"wall {self.wall_seconds:.1f} s, "
                 f"{self.calls / max(self.wall_seconds, 1e-9):.0f} calls/s", "",
                 "calls per expected reason (thread / process / asyncio):"]
        for reason, count in sorted(self.reasons.items(), key=lambda kv: -kv[1]):
            split = " / ".join(str(self.by_isolation[(iso, reason)]) for iso in ISOLATIONS)
            lines.append(f"  {reason:<18} {count:>7}   ({split})")
        lines += ["", "checkpoints (calls, s, RSS MiB, threads, fds):"]
        lines += [f"  {c.calls:>7} {c.seconds:>7.1f} {c.rss_kib / _MIB:>8.1f} {c.threads:>5} "
                  f"{c.fds:>5}" for c in self.checkpoints]
        _, memory = self.memory_verdict()
        lines += ["", f"memory: {memory}", "", "runner stats per mode (after close):"]
        names = [f.name for f in fields(RunnerStats)]
        for mode, stats in self.runner_stats.items():
            values = ", ".join(f"{n}={getattr(stats, n)}" for n in names
                               if getattr(stats, n))
            lines.append(f"  {mode}: {values}")
        for mode, counts in self.tool_call_children.items():
            lines.append(f"  {mode} tool-call supervisor before close: {counts}")
        lines += ["", f"leaks after close: {self.leaks or 'none'}",
                  f"problems: {self.problem_count}"]
        lines += [f"  {p}" for p in self.problems]
        if self.problem_count > len(self.problems):
            lines.append(f"  ... and {self.problem_count - len(self.problems)} more")
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)
