"""``OneShotEvent``: a ``threading.Event`` set once, never cleared, made without a Condition;
the per-call flags use it (the call's cancel token, its actor's stopped flag, its supervision
link's exit). And a pooled actor's URN: a per-process random part and a count, drawn again in a
forked child."""

from __future__ import annotations

import gc
import os
import threading
from typing import Any

import pytest

from toolvisor import CallContext, Ok, Tool, ToolCall
from toolvisor._one_shot import OneShotEvent
from toolvisor.actors import ActorThreadPool, PooledThreadingActor, ToolCallDispatcher
from toolvisor.actors._pooled import _next_urn
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import DynamicSupervisor

WAITERS = 8


def test_it_is_an_event_that_starts_unset_and_stays_set() -> None:
    flag = OneShotEvent()
    assert isinstance(flag, threading.Event)
    assert not flag.is_set() and flag.wait(0) is False and flag.wait(0.001) is False
    flag.set()
    flag.set()  # a second set does nothing
    assert flag.is_set() and flag.wait() is True and flag.wait(0) is True
    assert "set" in repr(flag) and "unset" not in repr(flag)


def test_until_someone_waits_it_holds_nothing_the_collector_tracks() -> None:
    flag = OneShotEvent()  # most flags of a call are never waited on: one tracked object each
    assert not [o for o in gc.get_referents(flag) if gc.is_tracked(o) and o is not OneShotEvent]
    assert flag.wait(0.001) is False  # the first waiter makes the lock it sleeps on
    assert [o for o in gc.get_referents(flag) if type(o) is type(threading.Lock())]
    flag.set()
    assert flag.wait() is True and flag.wait(0) is True


def test_clearing_it_is_refused() -> None:
    flag = OneShotEvent()
    flag.set()
    with pytest.raises(TypeError, match="set once and never cleared"):
        flag.clear()
    assert flag.is_set()


def test_one_set_wakes_every_waiter_and_racing_sets_break_nothing() -> None:
    flag = OneShotEvent()
    waiting = threading.Barrier(WAITERS + 1)
    woke: list[bool] = []

    def wait() -> None:
        waiting.wait()
        woke.append(flag.wait())
        woke.append(flag.is_set())  # no waiter's brief hold of the lock reads as unset

    def set_it(go: threading.Barrier) -> None:
        go.wait()
        flag.set()

    threads = [threading.Thread(target=wait) for _ in range(WAITERS)]
    for thread in threads:
        thread.start()
    waiting.wait()
    go = threading.Barrier(4)
    setters = [threading.Thread(target=set_it, args=(go,)) for _ in range(4)]
    for thread in setters:
        thread.start()
    for thread in setters + threads:
        thread.join()
    assert woke == [True] * (2 * WAITERS)
    assert flag.is_set() and flag.wait(0)


def test_a_calls_token_and_its_actors_stop_flag_are_one_shot_events() -> None:
    seen: list[Any] = []

    def look(arguments: Any, ctx: CallContext) -> Ok:
        seen.append(ctx.cancelled)
        return Ok(None)

    supervisor = DynamicSupervisor.start(max_children=8, shutdown=1.0)
    try:
        with ToolRunner(tool_timeout=5.0) as runner, \
                ToolCallDispatcher(supervisor, runner) as dispatcher:
            [outcome] = dispatcher.dispatch(
                [(Tool(name="look", handler=look), ToolCall(id="a", name="look"), None)])
            assert isinstance(outcome.result, Ok)
    finally:
        supervisor.stop()
    [token] = seen
    assert type(token) is OneShotEvent and not token.is_set()  # it ended before its deadline


class _Idle(PooledThreadingActor):
    pass


def test_pooled_actors_have_one_shot_stop_flags_and_distinct_urns() -> None:
    pool = ActorThreadPool(max_threads=2, idle_timeout=5.0)
    try:
        refs = [_Idle.start(thread_pool=pool) for _ in range(3)]
        assert all(type(ref.actor_stopped) is OneShotEvent for ref in refs)
        assert len({ref.actor_urn for ref in refs}) == 3
        assert all(ref.actor_urn.startswith("urn:uuid:") for ref in refs)
        for ref in refs:
            ref.stop()
        assert all(not ref.is_alive() and ref.actor_stopped.wait(0) for ref in refs)
    finally:
        pool.close()


def test_a_forked_child_names_its_actors_apart_from_its_parent() -> None:
    pool = ActorThreadPool(max_threads=1, idle_timeout=5.0)
    try:
        parent = _Idle.start(thread_pool=pool)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the URN its next actor would get, then leave at once
            os.write(write, _next_urn().encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            child_urn = pipe.read()
        os.waitpid(pid, 0)
        parent.stop()
    finally:
        pool.close()
    assert child_urn.startswith("urn:uuid:") and child_urn[:-12] != parent.actor_urn[:-12]
