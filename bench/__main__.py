"""``make bench``: toolvisor next to its floors and the frameworks users would pick instead.

Writes ``bench/results/bench.json`` and ``bench/results/bench.md`` and prints the table.
Competitors are measured only where the ``bench`` extra is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import _toolvisor, context_link, model_half, resilience, sandbox, wide_batch
from bench.competitors import markdown
from toolvisor.isolation import prepare_process_isolation

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {  # from the issues; "where a target is missed, the table says so"
    "per_call_us": 300.0, "nap_batch_ms": 65.0, "hung_thread_ms": 20.0,
    "hung_asyncio_ms": 20.0, "worker_replaced_ms": 100.0, "checkpoint_1000_ms": 10.0,
}


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "cpu_model": model, "load_1min_at_start": load}


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "met" if value <= target else f"MISSED (target {target:g})"


def table(rows: list[dict[str, Any]]) -> str:
    floors = {r["batch"]: r for r in rows if r["kind"] == "floor"}
    turns = [r for r in rows if r["kind"] == "turn"]
    out = ["### Per-call cost of a no-op tool, whole model turn (median)", "",
           "| isolation | batch | turn ms | per call us | x plain call | x ThreadPoolExecutor "
           "| target <= 300 us (batch 100, thread) |", "|---|---|---|---|---|---|---|"]
    for r in (t for t in turns if t["tool"] == "no_op"):
        floor = floors[r["batch"]]
        target = (verdict(r["per_call_median_us"], TARGETS["per_call_us"])
                  if r["batch"] == 100 and r["isolation"] == "thread" else "")
        out.append(f"| {r['isolation']} | {r['batch']} | {r['turn_median_ms']:.2f} | "
                   f"{r['per_call_median_us']:.0f} | "
                   f"{r['per_call_median_us'] / floor['plain_call_us']:.0f} | "
                   f"{r['per_call_median_us'] / floor['thread_pool_us']:.1f} | {target} |")
    out += ["", "Floors: " + ", ".join(
        f"batch {b}: plain call {f['plain_call_us']:.1f} us, ThreadPoolExecutor "
        f"{f['thread_pool_us']:.0f} us per call" for b, f in sorted(floors.items())), ""]
    out += ["### A batch of sync tools that each sleep 50 ms (whole turn, median)", "",
            "| isolation | batch 1 | batch 10 | batch 100 | target <= 65 ms (batch 100) |",
            "|---|---|---|---|---|"]
    for isolation in _toolvisor.ISOLATIONS:
        naps = {r["batch"]: r["turn_median_ms"] for r in turns
                if r["tool"] == "nap" and r["isolation"] == isolation}
        out.append(f"| {isolation} | " + " | ".join(f"{naps.get(b, float('nan')):.0f} ms"
                                                   for b in (1, 10, 100))
                   + (" | n/a (as many at once as the cluster has CPUs) |" if isolation == "ray"
                      else f" | {verdict(naps.get(100), TARGETS['nap_batch_ms'])} |"))
    out += ["", f"(`process` runs the sleeping batches on min(batch, "
            f"{_toolvisor.MAX_PROCESS_WORKERS}) worker processes; `ray` on a local cluster "
            "with one worker per core.)"]
    out += ["", "### A hung sync tool with a 200 ms timeout", "",
            "| isolation | deadline to result (model sees `timeout`) | worker killed and "
            "replaced | target |", "|---|---|---|---|"]
    for r in (r for r in rows if r["kind"] == "hung"):
        replaced = r["worker_replaced_ms"]
        if r["isolation"] == "process":
            target = verdict(replaced, TARGETS["worker_replaced_ms"]) + " (replaced <= 100 ms)"
        else:
            target = verdict(r["deadline_to_result_ms"], TARGETS["hung_thread_ms"]) + \
                " (<= 20 ms)"
        out.append(f"| {r['isolation']} | +{r['deadline_to_result_ms']:.1f} ms | "
                   + (f"+{replaced:.1f} ms" if replaced is not None else "n/a (thread "
                      "abandoned / task cancelled / Ray task force-cancelled)")
            + f" | {target} |")
    out += ["", "### Checkpoint and restore of a turn history", "",
            "| messages | checkpoint | restore | size | target < 10 ms (1,000) |",
            "|---|---|---|---|---|"]
    for r in (r for r in rows if r["kind"] == "checkpoint"):
        both = r["checkpoint_ms"] + r["restore_ms"]
        target = verdict(both, TARGETS["checkpoint_1000_ms"]) if r["messages"] == 1000 else ""
        out.append(f"| {r['messages']} | {r['checkpoint_ms']:.2f} ms | {r['restore_ms']:.2f} ms"
                   f" | {r['bytes'] / 1024:.0f} KiB | {target} |")
    return "\n".join(out)


def competitors(repeats: int) -> tuple[list[dict[str, Any]], str]:
    """The competitor rows, measured in a separate process so their imports stay out of ours."""
    out = RESULTS / "competitors.json"
    out.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "bench.competitors", "--repeats", str(repeats),
                           "--output", str(out)], capture_output=True, text=True, check=False)
    if not out.exists():
        return [], f"(competitors not measured: {done.stderr.strip()[-400:] or 'no output'})"
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    return rows, markdown(rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-competitors", action="store_true")
    args = parser.parse_args()
    prepare_process_isolation()
    _toolvisor.start_ray()
    sizes = (1, 10, 100)
    print("measuring toolvisor ...", flush=True)
    rows = (_toolvisor.floor_rows(args.repeats, sizes) + _toolvisor.turn_rows(args.repeats, sizes)
            + _toolvisor.hung_rows(args.repeats) + _toolvisor.checkpoint_rows(args.repeats))
    ours = table(rows)
    print("measuring a wide batch of waiting calls ...", flush=True)
    wide_rows = wide_batch.measure()
    ours += "\n\n" + wide_batch.table(wide_rows)
    print("measuring the call context out of process ...", flush=True)
    link_rows = context_link.measure(args.repeats)
    ours += "\n\n" + context_link.table(link_rows)
    print("measuring sandboxed calls ...", flush=True)
    sandbox_rows = sandbox.measure(args.repeats)
    ours += "\n\n" + sandbox.table(sandbox_rows)
    print("measuring the model half ...", flush=True)
    model_rows = model_half.measure(competitors=not args.no_competitors)
    ours += "\n\n" + model_half.table(model_rows)
    print("measuring what a circuit breaker saves ...", flush=True)
    resilience_rows = resilience.measure()
    ours += "\n\n" + resilience.table(resilience_rows)
    theirs_rows: list[dict[str, Any]] = []
    theirs = "(competitors skipped)"
    if not args.no_competitors:
        print("measuring competitors ...", flush=True)
        theirs_rows, theirs = competitors(args.repeats)
    info = machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench.json").write_text(json.dumps(
        {"machine": info, "toolvisor": rows, "model_half": model_rows,
         "resilience": resilience_rows, "context_link": link_rows, "sandbox": sandbox_rows,
         "wide_batch": wide_rows,
         "competitors": theirs_rows}, indent=2))
    report = (f"Machine: {info['cpu_model']}, {info['cpus']} cores, Python {info['python']}, "
              f"load {info['load_1min_at_start']:.2f} at start; medians of {args.repeats} "
              f"runs.\n\n## toolvisor\n\n{ours}\n\n## The same batches in other frameworks\n\n"
              f"{theirs}\n")
    (RESULTS / "bench.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
