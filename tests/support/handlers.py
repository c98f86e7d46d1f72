"""Module-level handlers for runner tests: importable by name in a worker process."""

from __future__ import annotations

import asyncio
import ctypes
import functools
import os
import signal
import threading
import time
from typing import Any

from pydantic import BaseModel

from toolvisor import AskUser, CallContext, Err, Halt, Ok, Pending, function_tool, tool


def ok_echo(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments)


def no_op(arguments: dict[str, Any]) -> Ok:
    return Ok(None)


def raises(arguments: dict[str, Any]) -> Ok:
    raise ValueError("boom")


def exits(arguments: dict[str, Any]) -> Ok:
    raise SystemExit(3)


def garbage(arguments: dict[str, Any]) -> Any:
    return {"not": "a result"}


def returns_err(arguments: dict[str, Any]) -> Err:
    return Err({"code": 7})


def unencodable(arguments: dict[str, Any]) -> Ok:
    return Ok(threading.Lock())


class NeedsTwoArguments(Exception):
    """Pickles, but fails to unpickle: its __init__ wants two arguments."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(f"{first}/{second}")


def raises_unpicklable(arguments: dict[str, Any]) -> Ok:
    raise NeedsTwoArguments("a", "b")


def hangs_cooperatively(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Returns once the call's token is set: at its deadline, or when cancelled."""
    ctx.cancelled.wait()
    return Ok("finished late")


def hangs_forever(arguments: dict[str, Any]) -> Ok:
    """A sync handler that ignores cancellation: only killing its process stops it."""
    while True:
        time.sleep(1)


def sleeps(arguments: dict[str, Any]) -> Ok:
    time.sleep(arguments.get("seconds", 0.05))
    return Ok("slept")


def hard_exit(arguments: dict[str, Any]) -> Ok:
    os._exit(3)


def killed_by_signal(arguments: dict[str, Any]) -> Ok:
    os.kill(os.getpid(), signal.SIGKILL)
    return Ok(None)


def segfault(arguments: dict[str, Any]) -> Ok:
    ctypes.string_at(0)
    return Ok(None)


def pid(arguments: dict[str, Any]) -> Ok:
    return Ok(os.getpid())


def call_id(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    return Ok(ctx.tool_call_id)


class Point(BaseModel):
    x: int
    y: int


@tool(isolation="process")
def add_point(point: Point) -> Ok:
    """Adds a point's coordinates (a @tool made for a worker process)."""
    return Ok(point.x + point.y)


async def async_ok(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(0)
    return Ok(arguments)


async def async_raises(arguments: dict[str, Any]) -> Ok:
    raise ValueError("async boom")


async def async_exits(arguments: dict[str, Any]) -> Ok:
    raise SystemExit(4)


async def async_garbage(arguments: dict[str, Any]) -> Any:
    return 42


async def async_unencodable(arguments: dict[str, Any]) -> Ok:
    return Ok(threading.Lock())


async def async_hangs(arguments: dict[str, Any]) -> Ok:
    await asyncio.Event().wait()
    return Ok(None)


async def async_hangs_and_swallows(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Catches its cancellation and returns anyway: that result must be discarded."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        return Ok("too late")
    return Ok(None)


async def async_sleeps(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(arguments.get("seconds", 0.05))
    return Ok("slept")


not_importable = lambda arguments: Ok(1)  # noqa: E731 - its qualified name is "<lambda>"


def waits_at_barrier(arguments: dict[str, Any]) -> Ok:
    """Passes only once ``parties`` calls are inside their handlers at the same time."""
    BARRIER.wait(timeout=10)
    return Ok(threading.get_ident())


BARRIER = threading.Barrier(100)


def thread_ident(arguments: dict[str, Any]) -> Ok:
    return Ok(threading.get_ident())


LEGAL_BY_KIND: dict[str, Any] = {
    "ask": AskUser("sure?", ("y", "n")),
    "halt": Halt("stop", [1]),
}


def returns_pending(arguments: dict[str, Any]) -> Pending:
    return Pending(deadline=2)


def returns_legal(arguments: dict[str, Any]) -> Any:
    return LEGAL_BY_KIND[arguments["kind"]]


def exits_on_first_attempt(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Logs each run's attempt to ``arguments["log"]``; the first attempt kills its process."""
    with open(arguments["log"], "a") as log:
        log.write(f"{ctx.attempt}\n")
    if ctx.attempt == 1:
        os._exit(9)
    return Ok(ctx.attempt)


class Counter:
    """Stateful tools for a ``RayActor``: the count lives in the actor."""

    def __init__(self, start: int = 0) -> None:
        self.count = start

    @function_tool
    def add(self, by: int = 1) -> int:
        """Add ``by`` to the count."""
        self.count += by
        return self.count

    @function_tool
    def crash(self) -> None:
        """Kill the actor's process."""
        os._exit(7)

    @function_tool(timeout=1.0)
    def hang(self) -> None:
        """Never return."""
        threading.Event().wait()


def batch_member(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """A call sent in a batch: reports "started" if told to, then hangs for ever (``hang``),
    or reads two bytes from the FIFO named by ``fifo`` (blocking until the test writes them),
    and returns ``n``."""
    if arguments.get("report"):
        ctx.report_progress("started")
    if arguments.get("hang"):
        while True:
            time.sleep(1)
    if "fifo" in arguments:
        with open(arguments["fifo"], "rb") as fifo:
            fifo.read(2)
    return Ok(arguments.get("n"))


class HeldPickling:
    """A handler whose pickling (when the Ray backend sends its call) sets ``entered`` and then
    waits until ``release`` is set; it arrives on the worker as ``ok_echo``. Meanwhile the
    sender can send nothing else, so the calls started then are sent together."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, arguments: dict[str, Any]) -> Ok:
        return Ok(arguments)

    def __reduce__(self) -> tuple[Any, ...]:
        self.entered.set()
        self.release.wait(60)
        return (functools.partial, (ok_echo,))
