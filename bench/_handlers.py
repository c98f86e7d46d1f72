"""Module-level tool handlers for the benchmarks (process isolation imports them by name)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from toolvisor import CallContext, Ok


def no_op(arguments: dict[str, Any]) -> Ok:
    return Ok(None)


async def async_no_op(arguments: dict[str, Any]) -> Ok:
    return Ok(None)


def nap(arguments: dict[str, Any]) -> Ok:
    time.sleep(0.05)
    return Ok(None)


async def async_nap(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(0.05)
    return Ok(None)


def hang(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Hangs for good; reports its start on the (system-wide) monotonic clock."""
    return Ok({"started": time.monotonic(), "ignored": ctx.cancelled.wait(30)})


def hang_hard(arguments: dict[str, Any]) -> Ok:
    """Ignores every cancellation: only killing its process stops it."""
    time.sleep(30)
    return Ok(None)


async def async_hang(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(30)
    return Ok(None)


def state_reads(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Microseconds per ``ctx.state.get``, timed where the handler runs."""
    assert ctx.state is not None
    count = arguments["count"]
    started = time.perf_counter()
    for _ in range(count):
        ctx.state.get("city")
    return Ok((time.perf_counter() - started) / count * 1e6)


def journal_steps(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Microseconds per journaled ``run_json`` step (a new record each), timed where it runs."""
    effects = ctx.durable_effects()
    count = arguments["count"]
    started = time.perf_counter()
    for index in range(count):
        effects.run_json(f"step-{index}", index, _double)
    return Ok((time.perf_counter() - started) / count * 1e6)


def _double(value: int) -> int:
    return value * 2
