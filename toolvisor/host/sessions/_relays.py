"""A child's question asked through its parent, and the parent's answer given to the child.

A handler whose child session suspended on a question returns ``ctx.sessions.relay(outcome)``
(``Agent.as_tool`` does it itself): an ``AskUser`` asking the child's question, prefixed by the
child agent's name (``researcher > Which year?``; a relay of a relay reads
``researcher > analyst > Which year?``: the chain), and a ``Relay`` kept by the parent's agent
under the parent run and call. The parent run suspends on it as on any question.

Resuming the parent with answers (``Agent.resume``) passes through :meth:`Relays.answer` first:
each answer to a relayed call resumes the child instead (``Agent.resume`` of the child's agent,
so a child's own relays go on down the chain); once every such child is back, the parent is
resumed with the child's result in the answer's place: its final text (``Ok``), an ``Err`` if
it failed or halted, or, when the child asks again, its next question, so the parent stays
suspended on it (each wrapped in ``Relayed``: the child checked the user's answer). A refused
answer (not one of the options) changes nothing: the relay is kept and the parent can be
resumed again. The table is in memory, under a lock (handlers add to it from their threads,
``resume`` takes from it on the caller's thread). With a store, an answered call that has no
relay here (the parent was resumed after a restart, or by another agent) is looked up with
``recover``, which derives it from the parent's signed suspension and its journal.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from toolvisor.contract import AskUser, CapabilityError
from toolvisor.host._mail import reply_future
from toolvisor.host.sessions._agent_tool import outcome_result
from toolvisor.machine import Relayed, Suspended

Resume = Callable[[Suspended, Any], tuple[str, Future[Any]]]
"""An agent's ``resume`` without the wait: the run id and the future of its next outcome."""


@dataclass(frozen=True, slots=True)
class Relay:
    """A parent call asking its child's question: who hosts the child, and its suspension; or,
    for a child that took its answer before a restart, how to follow it to its next outcome."""

    agent_name: str
    resume: Resume
    suspended: Suspended | Callable[[], Future[Any]]

    def answer(self, value: Any) -> Future[Any]:
        """The future of the child's next outcome once given ``value`` (if it still asks)."""
        if isinstance(self.suspended, Suspended):
            return self.resume(self.suspended, value)[1]
        return self.suspended()


def relayed_question(agent_name: str, suspended: Any) -> AskUser:
    """The ``AskUser`` a parent call asks for a child that suspended on one question."""
    if not isinstance(suspended, Suspended) or suspended.keys or suspended.pending \
            or suspended.manual or len(suspended.questions) != 1:
        raise CapabilityError(
            "relay_unsupported", "only a child session suspended on one question can be "
            "asked through its parent; this one waits on "
            f"{sorted(getattr(suspended, 'call_ids', ()))}")
    question = suspended.questions[0]
    return AskUser(f"{agent_name} > {question.question}", question.options)


def waits_on_keys(outcome: Any) -> bool:
    """Whether ``outcome`` is a suspension on completion keys and nothing else."""
    return isinstance(outcome, Suspended) and bool(outcome.keys) \
        and set(outcome.keys) == set(outcome.call_ids)


def waits_on_one_key(suspended: Any) -> str | None:
    """The key a child suspended on exactly one completion key (and nothing else) waits on."""
    if isinstance(suspended, Suspended) and len(suspended.keys) == 1 \
            and len(suspended.call_ids) == 1:
        return next(iter(suspended.keys.values()))
    return None


class Relays:
    """The relays of one agent's runs, by (parent run, parent call). Thread-safe."""

    def __init__(self, recover: Callable[[Suspended, str], Relay | None]) -> None:
        self._recover = recover  # a relay from the store, for a call with none here
        self._lock = threading.Lock()
        self._relays: dict[tuple[str, str], Relay] = {}
        self._keys: dict[tuple[str, str], str] = {}  # a parent call's Pending shows its
        # child's key: resolving it resumes the child, whose outcome resolves the parent's

    def add(self, run_id: str, call_id: str, relay: Relay) -> None:
        with self._lock:
            self._relays[(run_id, call_id)] = relay

    def add_key(self, run_id: str, call_id: str, child_key: str) -> None:
        with self._lock:
            self._keys[(run_id, call_id)] = child_key

    def follows_key(self, run_id: str, call_id: str) -> bool:
        """Whether the call's key relay is followed here (its child attached to)."""
        with self._lock:
            return (run_id, call_id) in self._keys

    def forget(self, run_id: str, call_id: str) -> None:
        """The parent call's run stopped its work or was cancelled: its relays go with it."""
        with self._lock:
            self._relays.pop((run_id, call_id), None)
            self._keys.pop((run_id, call_id), None)

    def shown_keys(self, run_id: str, keys: dict[str, str]) -> dict[str, str]:
        """The keys a suspended run shows, by call id: a call relaying its child's wait shows
        the child's key (the one to resolve), the chain's last."""
        with self._lock:
            return {call_id: self._keys.get((run_id, call_id), key)
                    for call_id, key in keys.items()}

    def answer(self, asked: Suspended, answers: dict[str, Any],
               proceed: Callable[[dict[str, Any]], Future[Any]]) -> Future[Any]:
        """Give the relayed answers to the children of the verified suspension ``asked``, then
        ``proceed`` with the answers for the parent; the future of the parent's next outcome."""
        run_id = asked.run_id
        with self._lock:
            relays = {c: r for c in answers if (r := self._relays.pop((run_id, c), None))}

        def restore() -> None:
            with self._lock:
                for call_id, relay in relays.items():
                    self._relays.setdefault((run_id, call_id), relay)

        try:
            relays.update({c: r for c in answers if c not in relays
                           and (r := self._recover(asked, c)) is not None})
        except Exception:
            restore()
            raise
        if not relays:
            return proceed(answers)
        outcome = reply_future()
        results = dict(answers)
        left = [len(relays)]
        lock = threading.Lock()

        def child_back(call_id: str, relay: Relay, child: Future[Any]) -> None:
            try:
                result = self._result(run_id, call_id, relay, child.result())
            except Exception as exc:
                restore()
                if not outcome.done():
                    outcome.set_exception(exc)
                return
            with lock:
                results[call_id] = result
                left[0] -= 1
                last = left[0] == 0
            if last and not outcome.done():
                _chain(lambda: proceed(results), outcome)

        for call_id, relay in relays.items():
            try:
                child = relay.answer(answers[call_id])
            except Exception:
                restore()
                raise
            child.add_done_callback(functools.partial(child_back, call_id, relay))
        return outcome

    def _result(self, run_id: str, call_id: str, relay: Relay, child: Any) -> Relayed:
        """The parent call's answer for what the child ended with after its answer."""
        if isinstance(child, Suspended) and len(child.questions) == 1 and not child.keys:
            self.add(run_id, call_id, Relay(relay.agent_name, relay.resume, child))
            return Relayed(relayed_question(relay.agent_name, child))
        return Relayed(outcome_result(child, relay.agent_name))


def _chain(start: Callable[[], Future[Any]], into: Future[Any]) -> None:
    """Start what ``start`` starts and give its outcome (or failure) to ``into``."""
    try:
        started = start()
    except Exception as exc:
        into.set_exception(exc)
        return

    def copy(done: Future[Any]) -> None:
        error = done.exception()
        if error is not None:
            into.set_exception(error)
        else:
            into.set_result(done.result())
    started.add_done_callback(copy)
