"""What the worker side's proxies need of the link, and nothing of its I/O: ``Asks`` (a
request to the agent) and ``portable`` (an exception as it crosses). The proxies of the call
context (``_remote_context.py``) build on it, and so do those they start only when a call
needs them (``_remote_processes.py``, ``_worker_tracing.py``), with no import back."""

from __future__ import annotations

import pickle
from typing import Any, Protocol


class Asks(Protocol):
    """A link to the agent (``ContextLink``): performs ``target.method(*args)`` on the agent's
    side for the call ``tag`` names, and gives its result (or raises its exception)."""

    def ask(self, tag: int, target: str, method: str, *args: Any) -> Any: ...


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip, else a ``RuntimeError`` that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__qualname__}: {exc}")
