"""The tool bodies every competitor driver registers, and the check that a turn really ran.

All drivers run the same three sync tools so their numbers compare: ``noop`` (returns at once),
``nap`` (sleeps 50 ms) and ``hang`` (sleeps far past any sane timeout). Each counts its calls so
a driver can prove that a timed turn really ran the N calls it asked for.
"""

import threading
import time
from collections.abc import Callable
from typing import Literal

ToolKind = Literal["noop", "nap"]

NAP_SECONDS = 0.05
HANG_SECONDS = 30.0
FINAL_TEXT = "done"
PROMPT = "go"


class CallCounter:
    """Counts tool calls made on any worker thread; the lock guards ``_calls``.

    Read by the driver's thread once the timed turns are over.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0

    def hit(self) -> None:
        with self._lock:
            self._calls += 1

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls


def make_tool(kind: ToolKind, counter: CallCounter) -> Callable[[], str]:
    """A zero-argument sync tool named after ``kind`` (frameworks take the name from it)."""
    if kind == "noop":

        def noop() -> str:
            """Do nothing and answer ok."""
            counter.hit()
            return "ok"

        return noop

    def nap() -> str:
        """Sleep for 50 milliseconds, then answer ok."""
        counter.hit()
        time.sleep(NAP_SECONDS)
        return "ok"

    return nap


class HangingTool:
    """A tool that sleeps ``HANG_SECONDS``; remembers the thread it runs on.

    Written by the framework's worker thread (``thread``), read by the child's main thread after
    the framework returned, to tell whether the tool was stopped or merely abandoned.
    """

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None

    def as_function(self) -> Callable[[], str]:
        def hang() -> str:
            """Wait for an answer that never comes."""
            self.thread = threading.current_thread()
            time.sleep(HANG_SECONDS)
            return "woke up"

        return hang

    def still_running(self) -> bool | None:
        """Whether the tool's thread is alive; None when the tool never started."""
        return None if self.thread is None else self.thread.is_alive()


def check_turns(driver: str, counter: CallCounter, batch: int, finals: list[object]) -> None:
    """Refuse timings whose turns did not run every call or did not end on the final text."""
    expected_calls = batch * len(finals)
    wrong = [final for final in finals if final != FINAL_TEXT]
    if counter.calls != expected_calls or wrong:
        raise RuntimeError(
            f"{driver}: {len(finals)} scripted turns ran {counter.calls} tool calls and "
            f"{len(wrong)} ended other than with {FINAL_TEXT!r} (first: {wrong[:1]!r}); expected "
            f"{expected_calls} calls. The driver no longer matches this framework version: "
            "fix its scripted model."
        )
