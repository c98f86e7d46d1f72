"""The leaf helpers of the host's mail: ``tell`` an actor that may have stopped, ``Reply``
(where a run's next outcome is delivered) and ``reply_future``.

Every room of the host uses them, so they import nothing of the host.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from typing import Any, Protocol

from pykka import ActorDeadError, ActorRef


class Reply(Protocol):
    """What a run's next outcome is delivered to, on the orchestrator's thread (a
    ``concurrent.futures.Future`` is one)."""

    def done(self) -> bool: ...

    def set_result(self, result: Any) -> None: ...

    def set_exception(self, exception: BaseException | None) -> None: ...


def tell(me: ActorRef[Any], message: Any) -> None:
    """Tell ``me``, unless it has stopped (then nobody waits for the message)."""
    with contextlib.suppress(ActorDeadError):
        me.tell(message)


def reply_future() -> Future[Any]:
    """A future for the orchestrator's answer, already marked running: a caller that gives up
    (a cancelled task) cannot cancel it under the orchestrator, whose thread sets it."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future
