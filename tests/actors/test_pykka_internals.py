"""The pykka internals the supervisors and call actors override or read are still there.

``SupervisedActor``, ``PooledThreadingActor`` and ``ToolCallActor`` hook into private parts of
pykka's ``Actor`` (pinned ``pykka>=4.1,<5``). If a new pykka release moves one of them, this test
names it, instead of supervision silently losing exit notices.
"""

from __future__ import annotations

import inspect
from typing import Any

import pykka
import pytest
from pykka import messages

# name -> the parameters (after self) our overrides and calls assume
ACTOR_METHODS: dict[str, list[str]] = {
    "_actor_loop": [],  # SupervisedActor wraps it: every actor's life ends there
    "_actor_loop_teardown": [],  # called again after a BaseException ends the loop
    "_handle_failure": ["exception_type", "exception_value", "traceback"],
    "_handle_receive": ["message"],
    "_start_actor_loop": [],  # PooledThreadingActor runs the loop on a pooled thread
    "_actor_loop_setup": [],  # PooledThreadingActor runs on_start in an actor's first slice
    "_actor_loop_running": [],  # ... and the running loop in every slice
    "_stop": [],
}


@pytest.mark.parametrize(("name", "params"), ACTOR_METHODS.items())
def test_actor_methods_we_override_keep_their_signature(name: str, params: list[str]) -> None:
    method = getattr(pykka.Actor, name, None)
    assert callable(method), f"pykka.Actor.{name} is gone"
    assert list(inspect.signature(method).parameters)[1:] == params


def test_the_inbox_factory_is_a_static_method() -> None:
    assert isinstance(inspect.getattr_static(pykka.Actor, "_create_actor_inbox"), staticmethod)


def test_stop_is_the_private_stop_message() -> None:
    assert "_ActorStop" in inspect.getsource(pykka.Actor.stop)
    assert hasattr(messages, "_ActorStop")


def test_the_loop_is_setup_running_teardown() -> None:
    source = inspect.getsource(pykka.Actor._actor_loop)
    assert [
        name for name in ("_actor_loop_setup", "_actor_loop_running", "_actor_loop_teardown")
        if name in source] == ["_actor_loop_setup", "_actor_loop_running", "_actor_loop_teardown"]
    # the BaseException case SupervisedActor takes over from pykka's "stop all actors"
    assert "stop_all" in inspect.getsource(pykka.Actor._actor_loop_running)


def test_instances_and_refs_have_the_attributes_we_read() -> None:
    class Probe(pykka.ThreadingActor):
        pass

    actor: Any = Probe()
    for attribute in ("_actor_ref", "actor_inbox", "actor_stopped", "actor_urn"):
        assert hasattr(actor, attribute), f"pykka actors no longer have {attribute}"
    assert actor._actor_ref._actor_weakref() is actor


def test_an_empty_mailbox_can_end_the_running_loop() -> None:
    """``PooledThreadingActor`` parks by raising from its mailbox's ``get``: the running loop
    must take its next message outside the ``try`` that turns errors into failures."""
    class Empty(Exception):
        pass

    class Inbox:
        def get(self) -> Any:
            raise Empty

    class Probe(pykka.ThreadingActor):
        pass

    actor: Any = Probe()
    actor.actor_inbox = Inbox()
    with pytest.raises(Empty):
        actor._actor_loop_running()
