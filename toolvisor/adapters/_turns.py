"""Turns for the questions of one run of a LangGraph ``ToolNode``, in tool-call order.

LangGraph keeps one list of resume values per task and hands them to the task's
``interrupt()``s in the order those are reached; a ``ToolNode`` runs its calls in parallel
(a thread pool under ``invoke``, ``asyncio.gather`` under ``ainvoke``), so which call reaches
``interrupt()`` first is a race, and two questions could get each other's answers. A call may
therefore ask (reach ``interrupt()``) only once every call before it in the AI message has
*passed*: returned its message, or raised (its own ``interrupt()`` among others). A call asks
all its questions in its turn, so the resume values meet the questions in tool-call order on
every run of the node. Once a call has raised, no later call asks: the node is interrupted
already, and the next run of the node asks the rest.

Only a node run on an edge (a *pull* task) is ordered: its input is the graph's state, the same
object for each of its calls, and its calls those of the state's last AI message. A task made
by a ``Send`` runs the calls it was sent, which its calls cannot tell, and has its own resume
values; its questions are asked as LangGraph asks them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage

_PULL = "__pregel_pull"
"""The first element of ``langgraph_path`` in a task's metadata when an edge started it."""


class NodeRun:
    """The turns of one run of a node: ``order``, the ids of its supervised calls in
    tool-call order. Shared by the node's calls, from the pool's threads (``wait_turn``) or
    the event loop's tasks (``await_turn``); ``_changed`` guards ``_passed`` and ``stopped``,
    which only grow, and each ``asyncio.Event`` is made, waited and set on the loop thread."""

    def __init__(self, order: Sequence[str]) -> None:
        self.order = tuple(order)
        self.stopped = False
        self._passed: set[str] = set()
        self._changed = threading.Condition()
        self._events: dict[str, asyncio.Event] = {}

    def wait_turn(self, call_id: str) -> bool:
        """Block until every call before ``call_id`` has passed; whether it may ask (no
        earlier call raised)."""
        earlier = self._earlier(call_id)
        with self._changed:
            self._changed.wait_for(lambda: earlier <= self._passed)
            return not self.stopped

    async def await_turn(self, call_id: str) -> bool:
        """:meth:`wait_turn` for a call on the event loop."""
        for earlier in self._earlier(call_id):
            with self._changed:
                if earlier in self._passed:
                    continue
                event = self._events.setdefault(earlier, asyncio.Event())
            await event.wait()
        with self._changed:
            return not self.stopped

    def pass_turn(self, call_id: str, *, raised: bool) -> bool:
        """Mark ``call_id`` passed (``raised``: it ended with an exception, so no later call
        asks); whether every call of the run has now passed."""
        with self._changed:
            self._passed.add(call_id)
            self.stopped = self.stopped or raised
            self._changed.notify_all()
            event = self._events.get(call_id)
            finished = self._passed.issuperset(self.order)
        if event is not None:  # only an awaiting call made it, so this is the loop thread
            event.set()
        return finished

    def _earlier(self, call_id: str) -> set[str]:
        return set(self.order[:self.order.index(call_id)])


class NodeRuns:
    """The :class:`NodeRun` of each node run in progress, keyed by its task's namespace and its
    input (the same object for every call of one run, a new one on each run); shared by all
    the calls of a ``SupervisedTools``, whichever thread they run on (``_lock`` guards
    ``_runs``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, int], tuple[object, NodeRun]] = {}

    def enter(self, state: object, config: Mapping[str, Any], call_id: str,
              supervised: Iterable[str]) -> tuple[tuple[str, int], NodeRun] | None:
        """The key and run of the node whose input is ``state`` (``config``: the call's
        LangGraph config, which names its task), for the call ``call_id``; ``None`` when its
        questions are not ordered: a task made by a ``Send``, or no AI message in ``state``
        holds the call. ``supervised``: the names of the tools that ask through these turns;
        a call of any other tool takes no turn."""
        metadata = config.get("metadata") or {}
        path = metadata.get("langgraph_path") or ()
        if not path or path[0] != _PULL:
            return None
        key = (str(metadata.get("langgraph_checkpoint_ns")), id(state))
        with self._lock:
            held = self._runs.get(key)
            if held is not None and held[0] is state:
                return (key, held[1]) if call_id in held[1].order else None
            calls = _calls_with(state, call_id)
            if calls is None:
                return None
            names = set(supervised)
            run = NodeRun([c["id"] for c in calls if c["name"] in names])
            self._runs[key] = (state, run)  # holding state keeps its id unique
            return key, run

    def leave(self, key: tuple[str, int], run: NodeRun, call_id: str, *, raised: bool) -> None:
        """``call_id`` has passed; the run is forgotten once all its calls have."""
        if run.pass_turn(call_id, raised=raised):
            with self._lock:
                if key in self._runs and self._runs[key][1] is run:
                    del self._runs[key]


def _calls_with(state: object, call_id: str) -> list[Any] | None:
    """The tool calls of the AI message in ``state`` (the node's messages, or a dict or object
    holding them) that asked for ``call_id``; ``None`` if there is none."""
    if isinstance(state, list):
        lists: Iterable[Any] = [state]
    elif isinstance(state, dict):
        lists = state.values()
    else:
        lists = getattr(state, "__dict__", {}).values()
    for messages in lists:
        if not isinstance(messages, list):
            continue
        for message in reversed(messages):
            if isinstance(message, AIMessage) and any(
                    call.get("id") == call_id for call in message.tool_calls):
                return list(message.tool_calls)
    return None
