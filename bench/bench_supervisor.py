"""Per-child cost of start + ask + stop: under DynamicSupervisor vs a bare pykka actor.

Run: ``.venv/bin/python bench/bench_supervisor.py`` (plain script, no pytest).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import pykka

from toolvisor.supervisors import DynamicSupervisor, SupervisedActor

CHILDREN = 100
ROUNDS = 7


class BareActor(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class SupervisedNoop(SupervisedActor, pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def bare_batch() -> None:
    refs = [BareActor.start() for _ in range(CHILDREN)]
    for ref in refs:
        ref.ask("ping")
    for ref in refs:
        ref.stop()


def supervised_batch() -> None:
    supervisor = DynamicSupervisor.start(max_children=CHILDREN)
    try:
        refs = [supervisor.start_child(SupervisedNoop.start) for _ in range(CHILDREN)]
        for ref in refs:
            ref.ask("ping")
        for ref in refs:
            ref.stop()
    finally:
        supervisor.stop()


def per_child_us(batch: Callable[[], None]) -> list[float]:
    batch()  # warm up
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        batch()
        samples.append((time.perf_counter() - started) / CHILDREN * 1e6)
    return samples


def main() -> None:
    for label, batch in (("bare pykka ThreadingActor", bare_batch),
                         ("SupervisedActor under DynamicSupervisor", supervised_batch)):
        samples = per_child_us(batch)
        print(f"{label:42s} median {statistics.median(samples):7.1f} us/child  "
              f"min {min(samples):7.1f}  max {max(samples):7.1f}  "
              f"({CHILDREN} children x {ROUNDS} rounds)")


if __name__ == "__main__":
    main()
