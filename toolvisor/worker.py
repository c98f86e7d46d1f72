"""``Worker``: a host that claims the store's runnable runs and drives them, on any machine.

Runs are put into the store by ``agent.submit`` (or left there by a host that died or let them
go); every worker on the store claims those it has room for (the store makes sure no two take
the same run), drives each from its latest checkpoint under a lease, and lets a run go when it
waits on keys or answers (its outcome then is ``Suspended``), so that a resolution from
anywhere wakes it on whichever worker claims it next. ``toolvisor worker`` runs
one until ``SIGTERM``.

State: the runs being driven (``_driving``: run id to the future of its next outcome) and when
claims started failing (``_failing_since``) belong to
the thread that calls :meth:`Worker.run`; other threads (the orchestrator settling a future,
the store hearing of a runnable run, a signal handler calling :meth:`Worker.stop`) only set
the ``_wake`` event.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final

from toolvisor.agent import Agent, RunOutcome
from toolvisor.contract import ToolvisorError, check_seconds
from toolvisor.machine import Suspended

__all__ = ["POLL", "RECONNECT_FOR", "ClaimsFailingError", "Worker", "WorkerEvent",
           "agent_factory"]

WorkerEvent = Callable[[str, str, str], None]
"""``(what, run_id, detail)``: ``claimed``, ``finished`` (detail: the status), ``waiting`` (let
go until woken), ``released`` (let go at shutdown), ``lost`` (detail: the error), or
``claim_failed`` (run id ``-``; detail: the store's error; the worker looks again later)."""

POLL: Final = 0.5
"""How often (seconds) a worker looks for runnable runs when the store cannot tell it."""
RECONNECT_FOR: Final = 60.0
"""How long (seconds) a worker's claims may fail in a row (its store unreachable) before it
gives up: :meth:`Worker.run` raises :class:`ClaimsFailingError`, the ``worker`` command exits
1, and its supervisor restarts it."""


class ClaimsFailingError(ToolvisorError, RuntimeError):
    """Every claim of a worker failed for its ``reconnect_for`` seconds (the store cannot be
    reached, or refuses it): it stopped, so that whatever supervises it sees it and restarts
    it, rather than running on without work. The message names the last error."""


class Worker:
    """Drive up to ``concurrency`` of the store's runnable runs at once on ``agent``.

    ``poll_interval`` is how often it looks for work the store did not announce (always, on
    SQLite, for other processes' changes; on PostgreSQL ``LISTEN`` wakes it at once).
    ``grace`` is how long :meth:`run`, once stopped, lets the runs it drives finish or come to
    a wait; the agent's ``close`` then releases the others' leases, and any worker claims them
    at once. ``on_event`` hears what happens to each run. While the store cannot be reached
    each claim fails (``claim_failed``) and the store reconnects by itself once it is back;
    after ``reconnect_for`` seconds of nothing but failed claims :meth:`run` raises
    :class:`ClaimsFailingError`.
    """

    def __init__(self, agent: Agent, *, concurrency: int = 16, poll_interval: float = POLL,
                 grace: float = 30.0, reconnect_for: float = RECONNECT_FOR,
                 on_event: WorkerEvent | None = None) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"a Worker drives an Agent, got {type(agent).__name__}")
        if agent.store is None:
            raise ValueError("a Worker needs an agent with a store (Agent(..., store=...)): "
                             "it claims the runs of that store")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) \
                or concurrency < 1:
            raise ValueError(f"concurrency must be a positive int, got {concurrency!r}")
        check_seconds("poll_interval", poll_interval, positive=True)
        check_seconds("grace", grace)
        check_seconds("reconnect_for", reconnect_for, positive=True)
        self._agent = agent
        self._store = agent.store
        self._concurrency = concurrency
        self._poll = poll_interval
        self._grace = grace
        self._reconnect_for = reconnect_for
        self._failing_since: float | None = None  # monotonic time of the first failed claim
        self._on_event = on_event or (lambda what, run_id, detail: None)
        self.ready = threading.Event()
        """Set once :meth:`run` listens to the store and has made its first claim (or ended)."""
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stop_asked = False  # written once by stop(), on whichever thread calls it first
        self._driving: dict[str, Future[RunOutcome]] = {}

    def stop(self) -> None:
        """Stop claiming; :meth:`run` lets its runs finish or wait, then returns. Any thread
        (or a signal handler) may call it, as often as it likes."""
        if self._stop_asked:
            # A signal handler runs between two bytecodes of the thread it interrupts: a second
            # signal (a process group's and a direct one, Ctrl-C twice) can arrive inside the
            # first handler's Event.set, whose lock is not reentrant: taking it again would
            # wait for ever. The flag is set before any lock is taken.
            return
        self._stop_asked = True
        self._stopping.set()
        self._wake.set()

    def run(self) -> list[str]:
        """Claim and drive runs until :meth:`stop`, then give the runs in flight ``grace``
        seconds; return the ids of those still in flight (closing the agent releases them)."""
        try:
            stop_listening = self._store.on_runnable(self._wake.set)
        finally:
            self.ready.set()  # on an error too: nobody waits for a worker that ended
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                self._settle()
                room = self._concurrency - len(self._driving)
                if room > 0:
                    claimed = self._claim(room)
                    for run_id, future in claimed.items():
                        self._drive(run_id, future)
                        self._on_event("claimed", run_id, "")
                    if len(claimed) == room:
                        continue  # there may be more
                self.ready.set()
                self._wake.wait(self._poll)
            return self._wind_down()
        finally:
            stop_listening()

    def _claim(self, room: int) -> dict[str, Future[RunOutcome]]:
        """Claim up to ``room`` runs; none if the store failed (down, busy: look again later),
        :class:`ClaimsFailingError` once every claim failed for ``reconnect_for``."""
        try:
            claimed = self._agent.claim_runs(room)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._on_event("claim_failed", "-", error)
            now = time.monotonic()
            if self._failing_since is None:
                self._failing_since = now
            elif now - self._failing_since >= self._reconnect_for:
                raise ClaimsFailingError(
                    f"every claim failed for {self._reconnect_for:g} s (reconnect_for), the "
                    f"last with {error}; the worker stops so that its supervisor restarts "
                    "it") from exc
            return {}
        self._failing_since = None
        return claimed

    def _wind_down(self) -> list[str]:
        deadline = time.monotonic() + self._grace
        while True:
            self._wake.clear()
            self._settle()
            left = deadline - time.monotonic()
            if not self._driving or left <= 0:
                break
            self._wake.wait(min(left, self._poll))
        for run_id in self._driving:
            self._on_event("released", run_id, "")
        return sorted(self._driving)

    def _drive(self, run_id: str, future: Future[RunOutcome]) -> None:
        self._driving[run_id] = future
        future.add_done_callback(lambda _: self._wake.set())

    def _settle(self) -> None:
        """Take the outcomes that came: a run finished, or waits (and was let go)."""
        for run_id, future in list(self._driving.items()):
            if not future.done():
                continue
            del self._driving[run_id]
            error = future.exception()
            if error is not None:
                self._on_event("lost", run_id, f"{type(error).__name__}: {error}")
                continue
            outcome = future.result()
            if isinstance(outcome, Suspended):  # the agent let it go until it is woken
                self._on_event("waiting", run_id, "")
            else:
                self._on_event("finished", run_id, outcome.status)


def agent_factory(spec: str) -> Callable[[Any], Agent]:
    """The function ``module:function`` names, which takes the store and returns the
    ``Agent``; a ``ValueError`` (or ``ImportError``) saying what is wrong with ``spec``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"name the agent factory as module:function, got {spec!r} (e.g. "
                         "myapp.agents:make_agent, a function taking the store)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ImportError(f"cannot import {module_name!r} for the agent factory {spec!r}: "
                          f"{exc}; is it on PYTHONPATH?") from exc
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ValueError(f"{module_name} has no function {attribute!r} (the agent factory "
                         f"{spec!r}): give a function that takes the store and returns an "
                         "Agent")
    return _checked(factory, spec)


def _checked(factory: Callable[[Any], Any], spec: str) -> Callable[[Any], Agent]:
    """``factory``, refusing (``TypeError``) what it returns if that is not an ``Agent``."""

    def make(store: Any) -> Agent:
        agent = factory(store)
        if not isinstance(agent, Agent):
            raise TypeError(f"the agent factory {spec} returned {type(agent).__name__}, not "
                            "an Agent: return Agent(model, tools, store=store)")
        return agent

    return make
