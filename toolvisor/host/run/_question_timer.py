"""``QuestionTimer``: one thread that tells the orchestrator when a suspended run's question
expires.

The deadlines (on the host's clock: the store's) belong to the timer's thread; the
orchestrator's thread only posts ``arm`` and ``disarm`` to it, so no lock guards them. The clock
is read again every ``poll`` seconds, as a key waiter reads the store's, so an injected clock
that jumps is seen within one poll. The timer only tells: the orchestrator decides what is due.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from toolvisor.host._protocol import QuestionsDue


class QuestionTimer:
    """Tells ``QuestionsDue(run_id)`` once ``clock()`` reaches the deadline armed for the run
    (one per run: arming again replaces it). Started on the first ``arm``; ``close`` joins it."""

    def __init__(self, clock: Callable[[], float], poll: float,
                 tell: Callable[[Any], None]) -> None:
        self._clock = clock
        self._poll = poll
        self._tell = tell
        self._inbox: queue.SimpleQueue[tuple[str, float] | str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def arm(self, run_id: str, deadline: float) -> None:
        """Tell the orchestrator at ``deadline`` (host clock), unless disarmed first."""
        self._inbox.put((run_id, deadline))
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name="toolvisor-questions")
            self._thread.start()

    def disarm(self, run_id: str) -> None:
        """Forget the run's deadline (its questions were answered)."""
        if self._thread is not None:
            self._inbox.put(run_id)

    def close(self) -> None:
        """Stop the thread and forget every deadline."""
        if self._thread is not None:
            self._inbox.put(None)
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        deadlines: dict[str, float] = {}  # by run id: owned by this thread
        while True:
            try:
                commands = [self._inbox.get(timeout=self._poll if deadlines else None)]
            except queue.Empty:
                commands = []
            with contextlib.suppress(queue.Empty):
                while True:
                    commands.append(self._inbox.get_nowait())
            for command in commands:
                if command is None:
                    return
                if isinstance(command, tuple):
                    deadlines[command[0]] = command[1]
                else:
                    deadlines.pop(command, None)
            now = self._clock()
            for run_id in [r for r, at in deadlines.items() if at <= now]:
                del deadlines[run_id]
                self._tell(QuestionsDue(run_id))
