"""Fault-injecting tool handlers for the soak (``bench.soak``) and its short test variant.

Every handler is a module-level function, so ``process`` isolation can import it by name in a
worker. Each behaviour exists once per isolation (``thread``, ``process``, ``asyncio``); the
tool names are ``<isolation>_<behaviour>``. Every tool takes ``{"tag": str}`` (the call's id),
so a healthy result proves it reached the call that asked for it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any, Literal, TypeAlias

from toolvisor import CallContext, Err, Ok, Tool

Isolation: TypeAlias = Literal["thread", "process", "asyncio"]
ISOLATIONS: tuple[Isolation, ...] = ("thread", "process", "asyncio")

HUGE_BYTES = 1_000_000
"""What a ``huge`` handler returns: its tag and then this many bytes."""

HANG_SECONDS = 60.0
"""How long a hanging handler would hang if nobody stopped it."""

ARGUMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["tag"],
    "properties": {"tag": {"type": "string"}},
}


def reported_text(tag: str) -> str:
    """What a ``reported`` handler says in its ``Err``."""
    return f"reported {tag}"


# --- sync handlers: thread and process isolation ------------------------------------------


def healthy(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments["tag"])


def raising(arguments: dict[str, Any]) -> Ok:
    raise RuntimeError(f"injected failure {arguments['tag']}")


def exiting(arguments: dict[str, Any]) -> Ok:
    sys.exit(3)


def hang_cooperatively(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Thread isolation: waits on its cancellation token, which the deadline sets."""
    ctx.cancelled.wait(HANG_SECONDS)
    return Ok("too late")


def hang_for_real(arguments: dict[str, Any]) -> Ok:
    """Process isolation: ignores every cancellation; only killing its worker stops it."""
    time.sleep(HANG_SECONDS)
    return Ok("too late")


def garbage(arguments: dict[str, Any]) -> Any:
    return {"not": "a result", "tag": arguments["tag"]}


def huge(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments["tag"] + "x" * HUGE_BYTES)


def reported(arguments: dict[str, Any]) -> Err:
    return Err(reported_text(arguments["tag"]))


def unencodable(arguments: dict[str, Any]) -> Ok:
    return Ok(object())


def die(arguments: dict[str, Any]) -> Ok:
    """Process isolation only: the worker process itself exits mid-call."""
    os._exit(7)


# --- async handlers: asyncio isolation ----------------------------------------------------


async def async_healthy(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(0)
    return Ok(arguments["tag"])


async def async_raising(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(0)
    raise RuntimeError(f"injected failure {arguments['tag']}")


async def async_exiting(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(0)
    sys.exit(3)


async def async_hang(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(HANG_SECONDS)
    return Ok("too late")


async def async_garbage(arguments: dict[str, Any]) -> Any:
    return {"not": "a result", "tag": arguments["tag"]}


async def async_huge(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments["tag"] + "x" * HUGE_BYTES)


async def async_reported(arguments: dict[str, Any]) -> Err:
    return Err(reported_text(arguments["tag"]))


async def async_unencodable(arguments: dict[str, Any]) -> Ok:
    return Ok(object())


HANDLERS: dict[Isolation, dict[str, Any]] = {
    "thread": {
        "ok": healthy, "raise": raising, "exit": exiting, "hang": hang_cooperatively,
        "garbage": garbage, "huge": huge, "reported": reported, "unencodable": unencodable,
    },
    "process": {
        "ok": healthy, "raise": raising, "exit": exiting, "hang": hang_for_real,
        "garbage": garbage, "huge": huge, "reported": reported, "unencodable": unencodable,
        "die": die,
    },
    "asyncio": {
        "ok": async_healthy, "raise": async_raising, "exit": async_exiting, "hang": async_hang,
        "garbage": async_garbage, "huge": async_huge, "reported": async_reported,
        "unencodable": async_unencodable,
    },
}
"""The handler of each behaviour, by isolation (``die`` only exists in a worker process)."""


def tool_name(isolation: Isolation, behaviour: str) -> str:
    return f"{isolation}_{behaviour}"


def soak_tools(hang_timeout: float) -> list[Tool]:
    """Every soak tool; only the hanging ones get ``hang_timeout`` (the rest the agent's)."""
    return [
        Tool(name=tool_name(isolation, behaviour), handler=handler, isolation=isolation,
             input_schema=ARGUMENTS_SCHEMA,
             timeout=hang_timeout if behaviour == "hang" else None)
        for isolation, handlers in HANDLERS.items()
        for behaviour, handler in handlers.items()
    ]
