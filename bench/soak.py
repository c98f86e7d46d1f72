"""The fault-injection soak: thousands of supervised tool calls, every failure accounted for.

Run: ``python -m bench.soak --calls 20000 --crashes 5 --seed 1 --max-seconds 600`` (exit status
0 when every check passed, 1 otherwise; the summary lists each problem).

One ``Agent`` per execution mode, each with the tools of every isolation (``thread``,
``process``, ``asyncio``; see ``bench._soak_handlers``), so a batch mixes isolations the way a
real model's would. Runs go round-robin over the agents, one run at a time. Each run is 1-7
tool turns and a final answer; each turn asks for 1-20 calls whose behaviour is drawn from a
seeded mix (the first turn of each agent asks for every isolation x behaviour once). The model
checks, in every request, the results of the batch before: each call id has exactly one tool
result, with the reason its behaviour implies. A policy function records every failure it is
shown and continues; after each run it must have seen every failure of the run exactly once.

The model fails too (``MODEL_FAULTS``): it raises ``ModelError`` ``rate_limited`` (with a
``retry_after`` of 1-10 ms), ``unavailable`` or ``timeout``, which ``MODEL_RETRY`` retries, or
``rejected``, which ends the run ``Failed``. Every injected failure must be accounted for: a
retryable one by the retry of the same turn and then an answer, a rejection by the run ending
``Failed`` with ``model_error.reason == "rejected"`` and every tool result of the run in its
transcript (the final transcript of every run must hold exactly one result per call).

Then ``--crashes`` hosts are SIGKILLed mid-batch and their durable runs resumed by a fresh
process (``bench._crash_phase``): no call lost, no non-retryable side effect run twice.

Memory: at every tenth of the calls the process's RSS (after ``gc.collect()`` and glibc's
``malloc_trim``), threads and descriptors are recorded. "Flat" means no checkpoint after the
warm-up (the first 20% of the calls) is more than ``--rss-tolerance-mib`` (16) above the
warm-up's; the least-squares trend is printed too. The soak's own bookkeeping stays constant:
expectations live for one run, and its ``FunctionModel``s keep no requests.
After ``close()`` no thread, process or descriptor may be left (``LeakCheck``).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from bench._crash_phase import CrashReport, run_crashes
from bench._soak_handlers import (
    HANDLERS,
    ISOLATIONS,
    Isolation,
    reported_text,
    soak_tools,
    tool_name,
)
from toolvisor import (
    Agent,
    Completed,
    Failed,
    InvalidArguments,
    Limits,
    ModelError,
    RunOutcome,
    Suspended,
    ToolError,
)
from toolvisor.call import OutputBudget, OutputProjection
from toolvisor.contract import (
    Message,
    ModelErrorReason,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResultMessage,
)
from toolvisor.executor import RunnerStats
from toolvisor.isolation import prepare_process_isolation
from toolvisor.machine import CallAttempt, ContinueRun, Mode, ModelRetryPolicy
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

MODEL_RETRY = ModelRetryPolicy(max_attempts=5, base_delay=0.001, max_delay=0.01, jitter=0)
"""The agents' ``on_model_error``: quick retries, so an injected failure costs milliseconds."""

MODEL_FAULTS: dict[ModelErrorReason | None, int] = {
    None: 90, "rate_limited": 4, "unavailable": 3, "timeout": 2, "rejected": 1,
}
"""The model-call mix (relative weights; ``None`` answers). ``rejected`` is drawn for a turn's
first attempt only and nothing fails the last attempt ``MODEL_RETRY`` allows, so every retried
failure ends in an answer."""

FIRST_MODEL_CALLS: tuple[ModelErrorReason | None, ...] = (
    "rate_limited", "unavailable", "timeout", None, "rejected")
"""Each agent's first model calls: every retryable failure once, the answer (the coverage
batch), then a rejection, so the agent's first run ends ``Failed`` after a batch."""

MAX_TURNS = 8
_SHORT = {"parallel_batch_approval": "pba", "parallel_streaming": "pst", "sequential": "seq"}
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
    crashes: int = 5


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One call the model asks for, and what its behaviour implies."""

    id: str
    isolation: Isolation
    behaviour: str

    @property
    def expected(self) -> str:
        return EXPECTED[self.behaviour]

    def tool_call(self) -> ToolCall:
        """The call as the model asks for it (a missing tool, or bad arguments, on purpose)."""
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
    """What the soak has seen: calls per expected reason, model failures injected (and retried
    then answered, or ending a run ``Failed``), and every problem found.

    Written by whichever threads run the current run's model and policy (one call at a time)
    and by the main thread between runs; runs never overlap, and ``Agent.run`` returning
    orders the two.
    """

    def __init__(self) -> None:
        self.reasons: Counter[str] = Counter()
        self.by_isolation: Counter[tuple[str, str]] = Counter()
        self.model_faults: Counter[str] = Counter()
        self.model_recovered: Counter[str] = Counter()
        self.rejected_runs = 0
        self.problems: list[str] = []
        self.problem_count = 0

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < _MAX_PROBLEMS_KEPT:
            self.problems.append(text)


class SoakModel:
    """The model of one agent: plans each run's batches from a seeded RNG, fails some of its
    calls on purpose, and checks, in every request, the results of the batch it asked for
    before; also the agent's policy.

    A run's plan and observations are reset by the main thread before the run
    (:meth:`start_run`) and read by it after (:meth:`finish_run`); during the run only the
    run's model calls and policy calls touch them, one at a time.
    """

    def __init__(self, mode: Mode, rng: random.Random, config: SoakConfig,
                 ledger: Ledger) -> None:
        self.mode = mode
        self._rng = rng
        self._config = config
        self._ledger = ledger
        self._run = 0
        self._serial = 0  # call ids are unique per agent
        self._covered = False
        self._first_calls = deque(FIRST_MODEL_CALLS)
        self._turns_left = 0
        self._calls_left = 0
        self._issued: dict[str, PlannedCall] = {}
        self._last_batch: list[PlannedCall] = []
        self._observed: set[str] = set()
        self._policy_seen: dict[str, list[str]] = {}
        self._attempt = 1  # of this turn's model call
        self._unanswered: list[str] = []  # this turn's injected failures, awaiting an answer
        self._failed_at = 0  # how many messages the failed request had
        self._rejected = False

    def start_run(self, calls_left: int) -> str:
        """Plan a new run (at most ``calls_left`` calls, past the coverage batch); its prompt."""
        self._run += 1
        self._turns_left = self._rng.randint(1, MAX_TURNS - 1)
        self._calls_left = calls_left
        self._issued = {}
        self._last_batch = []
        self._observed = set()
        self._policy_seen = {}
        self._attempt = 1
        self._unanswered = []
        self._rejected = False
        return self._prompt

    @property
    def _prompt(self) -> str:
        return f"soak run {self._run} of {self.mode}"

    def finish_run(self, outcome: RunOutcome | None) -> int:
        """Check the run's outcome (``None``: it did not end), what the policy saw, that every
        call was answered and every injected model failure accounted for; count the calls."""
        if outcome is not None:
            self._check_outcome(outcome)
        for reason in self._unanswered:
            self._ledger.problem(f"{self.mode}: {self._prompt}: an injected {reason} model "
                                 "failure was not followed by a retry and an answer")
        for call_id, planned in self._issued.items():
            self._ledger.reasons[planned.expected] += 1
            self._ledger.by_isolation[(planned.isolation, planned.expected)] += 1
            if call_id not in self._observed:
                self._ledger.problem(f"{self.mode}: call {call_id} ({planned.isolation}/"
                                     f"{planned.behaviour}) never got a result")
            kind = planned.policy_kind()
            seen = self._policy_seen.get(call_id, [])
            if seen != ([] if kind is None else [kind]):
                self._ledger.problem(f"{self.mode}: the policy saw call {call_id} "
                                     f"({planned.isolation}/{planned.behaviour}) as {seen}, "
                                     f"expected {[] if kind is None else [kind]}")
        for call_id in self._policy_seen.keys() - self._issued.keys():
            self._ledger.problem(f"{self.mode}: the policy saw call {call_id!r}, which was "
                                 "never asked for")
        return len(self._issued)

    def policy(self, failed: CallAttempt, error: Any) -> ContinueRun:
        """The agent's ``on_tool_error``: record the failure, let the model see it."""
        self._policy_seen.setdefault(failed.id, []).append(policy_kind(error))
        return ContinueRun()

    def respond(self, request: ModelRequest) -> ModelResponse | str:
        """The ``FunctionModel`` function: fail if the mix says so; else check the last
        batch's results and ask for the next."""
        if self._rejected:
            self._ledger.problem(f"{self.mode}: {self._prompt}: the model was asked again "
                                 "after it rejected the run's request")
        if self._unanswered and len(request.messages) != self._failed_at:
            self._ledger.problem(f"{self.mode}: {self._prompt}: after the injected "
                                 f"{self._unanswered} the model was asked for another turn "
                                 "instead of the retry")
        fault = self._draw_fault()
        if fault is not None:
            raise self._inject(fault, len(request.messages))
        for reason in self._unanswered:
            self._ledger.model_recovered[reason] += 1
        self._unanswered = []
        self._attempt = 1
        self._check(request)
        if self._turns_left == 0 or self._calls_left <= 0:
            return FINAL_TEXT
        self._turns_left -= 1
        batch = self._random_batch() if self._covered else self._coverage_batch()
        self._covered = True
        self._calls_left -= len(batch)
        self._issued.update((p.id, p) for p in batch)
        self._last_batch = batch
        return calls(*(p.tool_call() for p in batch))

    def _draw_fault(self) -> ModelErrorReason | None:
        if self._first_calls:
            return self._first_calls.popleft()
        if self._attempt >= MODEL_RETRY.max_attempts:
            return None
        mix = {r: w for r, w in MODEL_FAULTS.items() if self._attempt == 1 or r != "rejected"}
        return self._rng.choices(list(mix), list(mix.values()))[0]

    def _inject(self, reason: ModelErrorReason, messages: int) -> ModelError:
        """Count the failure and say what the agent must do about it."""
        self._ledger.model_faults[reason] += 1
        if reason == "rejected":
            self._rejected = True
            return ModelError(reason, "injected rejection", status=400)
        self._unanswered.append(reason)
        self._failed_at = messages
        self._attempt += 1
        if reason == "rate_limited":
            return ModelError(reason, "injected rate limit", status=429,
                              retry_after=self._rng.uniform(0.001, 0.01))
        return ModelError(reason, f"injected {reason}",
                          status=503 if reason == "unavailable" else None)

    def _check_outcome(self, outcome: RunOutcome) -> None:
        """A run ends ``Completed`` with the final text, or ``Failed`` with the injected
        rejection; either way its transcript holds one result per call."""
        if isinstance(outcome, Suspended):
            self._ledger.problem(f"{self.mode}: {self._prompt} ended Suspended")
            return
        failure = outcome.model_error if isinstance(outcome, Failed) else None
        if self._rejected:
            if failure is not None and (failure.reason, failure.attempts) == ("rejected", 1):
                self._ledger.rejected_runs += 1
            else:
                self._ledger.problem(f"{self.mode}: {self._prompt} ended "
                                     f"{type(outcome).__name__} (model error {failure}), "
                                     "expected Failed with the injected rejection")
        elif not (isinstance(outcome, Completed) and outcome.text == FINAL_TEXT):
            detail = getattr(outcome, "reason", None) or getattr(outcome, "error", None)
            self._ledger.problem(f"{self.mode}: {self._prompt} ended "
                                 f"{type(outcome).__name__}: {detail}")
        self._check_transcript(outcome.messages)

    def _check_transcript(self, messages: Sequence[Message]) -> None:
        """Each call has exactly one result in the final transcript; a result the model never
        saw in a request (the last batch before a rejection) is checked here."""
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        counts = Counter(m.tool_call_id for m in results)
        for call_id in self._issued:
            if counts[call_id] > 1 or (counts[call_id] == 0 and call_id in self._observed):
                self._ledger.problem(f"{self.mode}: call {call_id} has {counts[call_id]} "
                                     "results in the run's final transcript")
        for message in results:
            planned = self._issued.get(message.tool_call_id)
            if planned is None:
                self._ledger.problem(f"{self.mode}: a result for call id "
                                     f"{message.tool_call_id!r} in the final transcript, "
                                     "which was never asked for")
            elif planned.id not in self._observed:
                self._observed.add(planned.id)
                why = check_result(planned, message, self._config.budget_bytes)
                if why is not None:
                    self._ledger.problem(f"{self.mode}: {why}")

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
                continue  # reported by finish_run
            self._observed.add(planned.id)
            why = check_result(planned, message, self._config.budget_bytes)
            if why is not None:
                self._ledger.problem(f"{self.mode}: {why}")
        self._last_batch = []

    def _coverage_batch(self) -> list[PlannedCall]:
        return [self._planned(iso, behaviour) for iso in ISOLATIONS
                for behaviour in (*HANDLERS[iso], "invalid_args", "unknown")]

    def _random_batch(self) -> list[PlannedCall]:
        size = min(self._rng.randint(1, self._config.max_batch), self._calls_left)
        batch = []
        for _ in range(size):
            isolation = self._rng.choice(ISOLATIONS)
            names = [b for b in WEIGHTS
                     if b in HANDLERS[isolation] or b in ("invalid_args", "unknown")]
            behaviour = self._rng.choices(names, [WEIGHTS[b] for b in names])[0]
            batch.append(self._planned(isolation, behaviour))
        return batch

    def _planned(self, isolation: Isolation, behaviour: str) -> PlannedCall:
        self._serial += 1
        return PlannedCall(f"{_SHORT[self.mode]}-{self._serial}", isolation, behaviour)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The process after ``calls`` calls: RSS (after ``gc.collect()`` and ``malloc_trim``),
    live threads and open file descriptors."""

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
    return len(os.listdir("/proc/self/fd"))


def _release_free_heap() -> None:
    """Hand glibc's free heap pages back to the OS, so RSS counts live memory rather than
    which thread's malloc arena last held a 1 MB output (a no-op without glibc)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def checkpoint(calls_done: int, started: float) -> Checkpoint:
    """The process now, after a full collection and a heap trim."""
    gc.collect()
    _release_free_heap()
    return Checkpoint(calls_done, time.monotonic() - started, _rss_kib(),
                      threading.active_count(), _fd_count())


def _slope(points: Sequence[Checkpoint]) -> float:
    """The least-squares slope of RSS over calls, in KiB per call (0 for fewer than 2)."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(p.calls for p in points) / len(points)
    mean_y = sum(p.rss_kib for p in points) / len(points)
    spread = sum((p.calls - mean_x) ** 2 for p in points)
    if not spread:
        return 0.0
    return sum((p.calls - mean_x) * (p.rss_kib - mean_y) for p in points) / spread


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
    model_faults: Counter[str] = field(default_factory=Counter)
    model_recovered: Counter[str] = field(default_factory=Counter)
    rejected_runs: int = 0
    crash: CrashReport | None = None
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
                      f"{later[-1].rss_kib / _MIB:.1f} MiB ({end / _MIB:+.1f}), trend "
                      f"{_slope([warm, *later]) * 10_000 / _MIB:+.2f} MiB per 10k calls; "
                      f"tolerance +{self.config.rss_tolerance_kib / _MIB:.0f} MiB: "
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
        lines += ["", "model failures injected, and what became of them:"]
        for reason in (r for r in MODEL_FAULTS if r is not None):
            then = (f"{self.rejected_runs} runs ended Failed, their tool results kept"
                    if reason == "rejected"
                    else f"{self.model_recovered[reason]} retried then answered")
            lines.append(f"  {reason:<18} {self.model_faults[reason]:>7}   ({then})")
        if self.crash is not None:
            lines += ["", *self.crash.summary_lines()]
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


def _tool_call_children(agent: Agent) -> dict[str, int]:
    """The agent's tool-call supervisor's ``count_children()`` (every call's actor is gone)."""
    for child in agent.supervisor.which_children():
        if child.id == "tool_calls" and child.ref is not None:
            supervisor: Any = child.ref  # a DynamicSupervisorRef
            counts: dict[str, int] = supervisor.count_children()
            return counts
    return {}


def _one_run(agent: Agent, model: SoakModel, calls_left: int,
             config: SoakConfig, ledger: Ledger) -> RunOutcome | None:
    """One run on ``agent``; ``None`` when it did not end (the soak must stop)."""
    prompt = model.start_run(calls_left)
    try:
        return agent.run(prompt, wait_for=config.run_timeout)
    except TimeoutError as exc:
        ledger.problem(f"{model.mode}: {prompt}: {exc}")
        return None


def run_soak(config: SoakConfig) -> SoakReport:
    """Run the soak described by ``config`` and report what it saw (never raises for a
    failed check: every one is in ``SoakReport.problems``)."""
    report = SoakReport(config)
    ledger = Ledger()
    seeds = random.Random(config.seed)
    budget = OutputProjection(OutputBudget(max_bytes=config.budget_bytes))
    prepare_process_isolation()  # process-wide helpers, not leaks of the agents
    leak_check = LeakCheck()
    started = time.monotonic()
    agents: list[tuple[Agent, SoakModel]] = []
    try:
        for mode in config.modes:
            model = SoakModel(mode, random.Random(seeds.getrandbits(64)), config, ledger)
            agent = Agent(FunctionModel(model.respond, keep_requests=False),
                          soak_tools(config.hang_timeout), on_tool_error=model.policy,
                          on_model_error=MODEL_RETRY, mode=mode,
                          limits=Limits(turns=MAX_TURNS, tool_output=budget))
            agents.append((agent, model))
        report.checkpoints.append(checkpoint(0, started))
        every = max(1, config.calls // config.checkpoints)
        next_checkpoint = every
        while report.calls < config.calls:
            if time.monotonic() - started > config.max_seconds:
                ledger.problem(f"stopped after {config.max_seconds} s (--max-seconds) with "
                               f"{report.calls} of {config.calls} calls done")
                break
            agent, model = agents[report.runs % len(agents)]
            outcome = _one_run(agent, model, config.calls - report.calls,
                               config, ledger)
            report.runs += 1
            report.calls += model.finish_run(outcome)
            if outcome is None:
                break
            if report.calls >= next_checkpoint:
                report.checkpoints.append(checkpoint(report.calls, started))
                while next_checkpoint <= report.calls:
                    next_checkpoint += every
        report.wall_seconds = time.monotonic() - started
        for agent, model in agents:
            report.tool_call_children[model.mode] = _tool_call_children(agent)
    finally:
        for agent, _ in agents:
            agent.close()
    for agent, model in agents:
        report.runner_stats[model.mode] = agent.runner.stats
    if config.crashes:
        report.crash = run_crashes(config.crashes, config.seed, MODES, config.run_timeout)
        for problem in report.crash.problems:
            ledger.problem(f"crash phase: {problem}")
    report.leaks = leak_check.leaks()
    report.reasons = ledger.reasons
    report.by_isolation = ledger.by_isolation
    report.model_faults = ledger.model_faults
    report.model_recovered = ledger.model_recovered
    report.rejected_runs = ledger.rejected_runs
    report.problems = ledger.problems
    report.problem_count = ledger.problem_count
    return report


def main(argv: Sequence[str] | None = None) -> int:
    defaults = SoakConfig()
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=defaults.calls,
                        help="tool calls in all (default %(default)s)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-seconds", type=float, default=defaults.max_seconds,
                        help="stop (and fail) past this many seconds (default %(default)s)")
    parser.add_argument("--hang-timeout", type=float, default=defaults.hang_timeout,
                        help="the hanging tools' timeout in seconds (default %(default)s)")
    parser.add_argument("--crashes", type=int, default=defaults.crashes,
                        help="hosts to SIGKILL mid-batch and resume (default %(default)s)")
    parser.add_argument("--rss-tolerance-mib", type=int,
                        default=defaults.rss_tolerance_kib // _MIB,
                        help="allowed RSS growth after warm-up (default %(default)s)")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error(f"--calls must be at least 1, got {args.calls}")
    if args.crashes < 0:
        parser.error(f"--crashes must be at least 0, got {args.crashes}")
    config = SoakConfig(calls=args.calls, seed=args.seed, max_seconds=args.max_seconds,
                        hang_timeout=args.hang_timeout, crashes=args.crashes,
                        rss_tolerance_kib=args.rss_tolerance_mib * _MIB)
    report = run_soak(config)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
