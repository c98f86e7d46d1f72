"""Module-level handlers that report progress or stay silent (importable by name in a worker
process; a Ray task gets them by value)."""

from __future__ import annotations

import os
import time
from typing import Any

from toolvisor import CallContext, Ok


def reports(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Two progress reports, then the result (which is all the model sees)."""
    ctx.report_progress("read the input")
    ctx.report_progress("half way", 0.5)
    return Ok({"pid": os.getpid()})


async def reports_async(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """The same from a coroutine."""
    ctx.report_progress("read the input")
    ctx.report_progress("half way", 0.5)
    return Ok({"pid": os.getpid()})


def silent(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Alive but silent: it reports nothing until its cancel token is set (in a worker
    process, until the worker is killed)."""
    ctx.cancelled.wait()
    return Ok("stopped")


def silent_sleeper(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Sleeps without looking at its token: only a kill stops it."""
    time.sleep(3600)
    return Ok("never")


def heartbeats(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Alive and saying so, until it is stopped: a heartbeat every few milliseconds."""
    while not ctx.cancelled.wait(0.005):
        ctx.heartbeat()
    return Ok("stopped")


async def silent_async(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Alive but silent, as a coroutine: only a cancel stops it."""
    import asyncio  # noqa: PLC0415

    await asyncio.sleep(3600)
    return Ok("never")
