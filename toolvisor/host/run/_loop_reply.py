"""``LoopReply``: a ``Reply`` (where the orchestrator delivers a run's next outcome) that
delivers it straight to an asyncio future on the caller's event loop.

``Agent.arun`` awaits its run's outcome on its own loop. A ``concurrent.futures.Future``
wrapped by ``asyncio.wrap_future`` costs a Condition (and its RLock and waiter list), a
second future and the callbacks chaining them, all kept until the run ends; a ``LoopReply``
is the loop's own future and one ``call_soon_threadsafe`` when the outcome comes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Generator
from typing import Any


def _set_result(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # the awaiting task was cancelled meanwhile: nobody wants it
        future.set_result(result)


def _set_exception(future: asyncio.Future[Any], exception: BaseException) -> None:
    if not future.done():
        future.set_exception(exception)


class LoopReply:
    """A run's next outcome, delivered to a future of ``loop``; awaited there, once.

    ``_delivered`` belongs to the orchestrator's thread, the only one that delivers; the
    future belongs to ``loop``, which sets it from the one callback the delivery schedules.
    """

    __slots__ = ("_delivered", "_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: asyncio.Future[Any] = loop.create_future()
        self._delivered = False

    def done(self) -> bool:
        """Whether the outcome (or an error) was delivered already."""
        return self._delivered

    def set_result(self, result: Any) -> None:
        """Deliver the outcome to the loop (once: later deliveries are ignored)."""
        self._deliver(_set_result, result)

    def set_exception(self, exception: BaseException | None) -> None:
        """Deliver an error to the loop instead of an outcome."""
        self._deliver(_set_exception, exception)

    def _deliver(self, setter: Callable[[asyncio.Future[Any], Any], None], value: Any) -> None:
        if self._delivered:
            return
        self._delivered = True
        with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody awaits it
            self._loop.call_soon_threadsafe(setter, self._future, value)

    def __await__(self) -> Generator[Any, None, Any]:
        return self._future.__await__()
