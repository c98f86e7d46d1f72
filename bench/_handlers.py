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
