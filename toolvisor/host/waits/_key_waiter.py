"""``KeyWaiter``: a thread that waits for one parked completion key to resolve.

The orchestrator's thread owns its waiters (starts, stops and joins them); a waiter only blocks
on the store and tells the orchestrator once, so the orchestrator's mailbox never waits on a key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from toolvisor._logging import get_event_log
from toolvisor.durable import RunStore, Wait


class KeyWaiter:
    """A thread blocked on one parked key: tells the orchestrator once the key resolves,
    expiring it first when its deadline (store clock) passes, fenced with the host's token
    (``fence``). ``stop`` ends it early."""

    def __init__(self, store: RunStore, wait: Wait, fence: int | None, poll: float,
                 tell: Callable[[], None]) -> None:
        self._store = store
        self._wait = wait
        self._fence = fence
        self._poll = poll
        self._tell = tell
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name=f"toolvisor-key-{wait.run_id[:8]}")
        self._thread.start()

    def _watch(self) -> None:
        try:
            resolved = self._until_resolved()
        except Exception as exc:  # the store failed: the run stays suspended, resumable later
            get_event_log("orchestrator").error("key_wait_failed", run_id=self._wait.run_id,
                                                error=f"{type(exc).__name__}: {exc}")
            return
        if resolved:
            self._tell()

    def _until_resolved(self) -> bool:
        store, key, deadline_at = self._store, self._wait.key, self._wait.deadline_at
        while not self._stop.is_set():
            pause = self._poll
            if deadline_at is not None:
                left = deadline_at - store.now()
                if left <= 0:
                    store.expire(key, store.now(), fence=self._fence)
                    return True
                pause = min(pause, left)
            if store.wait_for(key, pause) is not None:
                return True
        return False

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._thread.join()
