"""Runs every installed competitor driver and turns the results into rows, JSON and markdown.

Turn timings run in this process, framework after framework; then each hung-tool case runs in its
own child process (see ``_hung``), after all timings so no child competes with them for a core.
A framework whose distributions are missing yields one "not_installed" row; a driver that fails
yields an "error" row instead of ending the run.
"""

import json
import os
import platform
import statistics
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from bench.competitors._driver import Driver
from bench.competitors._hung import ROOT, run_hung_case
from bench.competitors._registry import FRAMEWORKS, Framework, framework_named
from bench.competitors._tools import HANG_SECONDS, NAP_SECONDS, ToolKind

BATCH_SIZES = (1, 10, 100)
RESULTS_PATH = ROOT / "bench" / "results" / "competitors.json"
TOOL_KINDS: tuple[ToolKind, ...] = ("noop", "nap")
NOISY_SPREAD = 2.0
"""A setting whose slowest repeat exceeds this many times its fastest is flagged as noisy."""

Row = dict[str, Any]
Progress = Callable[[str], None]


def run_all(
    repeats: int = 7,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    *,
    hung: bool = True,
    only: Collection[str] | None = None,
    progress: Progress | None = None,
) -> list[Row]:
    """Measure every installed competitor; rows of kind turn, hung, not_installed or error.

    ``only`` names frameworks from ``FRAMEWORKS`` (e.g. ``{"langgraph"}``); ``progress`` gets
    one line per finished measurement.
    """
    if repeats < 1 or any(batch < 1 for batch in batch_sizes):
        raise ValueError(f"repeats and batch sizes must be >= 1, got {repeats}, {batch_sizes}")
    chosen = FRAMEWORKS if only is None else tuple(framework_named(name) for name in only)
    say = progress or (lambda line: None)
    rows: list[Row] = []
    installed: list[Framework] = []
    for framework in chosen:
        missing = framework.missing()
        if missing:
            rows.append({"kind": "not_installed", "framework": framework.name, "missing": missing})
            say(f"{framework.name}: not installed (missing {', '.join(missing)})")
        else:
            installed.append(framework)
    for framework in installed:
        versions = framework.versions()
        for driver in framework.drivers():
            rows.extend(_turn_rows(framework, driver, versions, repeats, batch_sizes, say))
    if hung:
        for framework in installed:
            for driver in framework.drivers():
                rows.extend(_hung_rows(framework, driver, say))
    return rows


def _turn_rows(
    framework: Framework,
    driver: Driver,
    versions: dict[str, str | None],
    repeats: int,
    batch_sizes: Sequence[int],
    say: Progress,
) -> list[Row]:
    rows: list[Row] = []
    for kind in TOOL_KINDS:
        for batch in batch_sizes:
            try:
                timings = driver.time_turns(kind, batch, repeats)
            except Exception as error:
                say(f"{driver.name} {kind} x{batch}: FAILED {error!r}")
                rows.append(_error_row(framework, driver, f"{kind} x{batch}", error))
                continue
            median = statistics.median(timings)
            rows.append(
                {
                    "kind": "turn",
                    "framework": framework.name,
                    "driver": driver.name,
                    "versions": versions,
                    "tool": kind,
                    "batch": batch,
                    "repeats": repeats,
                    "turn_median_ms": median * 1e3,
                    "turn_min_ms": min(timings) * 1e3,
                    "turn_max_ms": max(timings) * 1e3,
                    "per_call_median_us": median / batch * 1e6,
                }
            )
            say(f"{driver.name} {kind} x{batch}: {median * 1e3:.1f} ms per turn")
    return rows


def _hung_rows(framework: Framework, driver: Driver, say: Progress) -> list[Row]:
    rows: list[Row] = []
    for variant, setting in driver.hung_variants.items():
        try:
            row = run_hung_case(framework.name, driver.name, variant, setting)
        except Exception as error:
            rows.append(_error_row(framework, driver, f"hung {variant}", error))
            continue
        rows.append(row)
        say(f"{driver.name} hung tool, {setting}: {row['verdict']}")
    return rows


def _error_row(framework: Framework, driver: Driver, case: str, error: Exception) -> Row:
    return {
        "kind": "error",
        "framework": framework.name,
        "driver": driver.name,
        "case": case,
        "error": repr(error),
    }


def write_json(rows: list[Row], path: Path = RESULTS_PATH) -> Path:
    """Write the rows with a note of the machine they ran on; returns the path."""
    document = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def markdown(rows: list[Row]) -> str:
    """Tables for no-op turns, 50 ms naps and the hung tool; a line per missing framework."""
    turns = [row for row in rows if row["kind"] == "turn"]
    batches = sorted({row["batch"] for row in turns})
    drivers = list(dict.fromkeys(row["driver"] for row in turns))
    hung = [row for row in rows if row["kind"] == "hung"]
    sections = []
    if turns:
        sections += [
            "### No-op sync tool: whole turn, median (per call)",
            _turn_table(turns, drivers, batches, "noop", per_call=True),
            f"### Sync tools sleeping {NAP_SECONDS * 1e3:g} ms: whole turn, median "
            f"(ideal ~{NAP_SECONDS * 1e3:g} ms at any N)",
            _turn_table(turns, drivers, batches, "nap", per_call=False),
        ]
    if hung:
        sections += [
            f"### A hung sync tool (sleeps {HANG_SECONDS:g} s), 200 ms timeout where offered",
            _hung_table(hung),
        ]
    notes = [
        f"- {row['framework']}: not installed (missing {', '.join(row['missing'])})"
        for row in rows
        if row["kind"] == "not_installed"
    ] + [
        f"- {row['driver']} {row['case']}: failed with {row['error']}"
        for row in rows
        if row["kind"] == "error"
    ]
    if any(row["turn_max_ms"] > NOISY_SPREAD * row["turn_min_ms"] for row in turns):
        notes.append(
            f"- †: the slowest repeat took over {NOISY_SPREAD:g}x the fastest; the machine was "
            "busy, see min/max in the JSON or rerun"
        )
    if notes:
        sections.append("\n".join(notes))
    return "\n\n".join(sections) + "\n"


def _turn_table(
    turns: list[Row], drivers: list[str], batches: list[int], tool: str, *, per_call: bool
) -> str:
    header = ["framework", "versions", *(f"N={batch}" for batch in batches)]
    lines = [_line(header), _line(["---"] * len(header))]
    for driver in drivers:
        cells: dict[int, str] = {}
        versions = ""
        for row in turns:
            if row["driver"] == driver and row["tool"] == tool:
                versions = ", ".join(
                    f"{name} {version}" for name, version in row["versions"].items()
                )
                cell = f"{row['turn_median_ms']:,.1f} ms"
                if per_call:
                    cell += f" ({row['per_call_median_us']:,.0f} µs/call)"
                if row["turn_max_ms"] > NOISY_SPREAD * row["turn_min_ms"]:
                    cell += " †"
                cells[row["batch"]] = cell
        lines.append(_line([driver, versions, *(cells.get(batch, "-") for batch in batches)]))
    return "\n".join(lines)


def _hung_table(hung_rows: list[Row]) -> str:
    header = ["framework", "setting", "returned after", "tool thread at return", "what happened"]
    lines = [_line(header), _line(["---"] * len(header))]
    for row in hung_rows:
        running = row["tool_running_at_return"]
        lines.append(
            _line(
                [
                    row["driver"],
                    row["setting"],
                    _returned_cell(row),
                    "worker process killed" if row.get("tool_worker_killed")
                    else "-" if running is None
                    else ("still running" if running else "stopped"),
                    row["verdict"],
                ]
            )
        )
    return "\n".join(lines)


def _returned_cell(row: Row) -> str:
    if row["refused"] is not None:
        return "refused"
    returned = row["returned_after_s"]
    return "never" if returned is None else f"{returned * 1e3:,.0f} ms"


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
