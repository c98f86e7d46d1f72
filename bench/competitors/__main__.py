"""``python -m bench.competitors``: measure installed competitors, write JSON, print markdown."""

import argparse
import sys
from pathlib import Path

from bench.competitors._registry import FRAMEWORKS
from bench.competitors._runner import BATCH_SIZES, RESULTS_PATH, markdown, run_all, write_json


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.competitors",
        description="Time pydantic-ai, the OpenAI Agents SDK and LangGraph on scripted turns.",
    )
    parser.add_argument("--repeats", type=int, default=7, help="timed turns per setting (7)")
    parser.add_argument(
        "--batches",
        type=lambda text: tuple(int(part) for part in text.split(",")),
        default=BATCH_SIZES,
        help="comma-separated tool calls per turn (1,10,100)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[framework.name for framework in FRAMEWORKS],
        help="measure only this framework (repeatable)",
    )
    parser.add_argument("--no-hung", action="store_true", help="skip the hung-tool cases")
    parser.add_argument("--output", type=Path, default=RESULTS_PATH, help="JSON results file")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rows = run_all(
        args.repeats,
        args.batches,
        hung=not args.no_hung,
        only=args.only,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    path = write_json(rows, args.output)
    print(markdown(rows))
    print(f"results written to {path}", file=sys.stderr)
    return 1 if any(row["kind"] == "error" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
