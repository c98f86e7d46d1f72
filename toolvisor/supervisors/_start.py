"""Starting one child as OTP's ``start_link`` does: it has started once its ``on_start`` has."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

import pykka
from pykka import ActorRef

from toolvisor._logging import EventLog
from toolvisor.supervisors._errors import ChildStartError
from toolvisor.supervisors._shutdown import abandon
from toolvisor.supervisors._supervised import (
    ChildLink,
    StartAck,
    request_shutdown,
    start_linked,
)


def start_synchronously(
    notify: Callable[[ChildLink], None],
    start: Callable[[], ActorRef[Any]],
    child_id: Hashable,
    start_timeout: float,
    log: EventLog,
) -> tuple[ChildLink, ActorRef[Any]]:
    """Start a child linked to ``notify`` and return once its ``on_start`` has returned.

    Raises :class:`ChildStartError` if ``start`` raises an ``Exception`` or returns no
    supervisable ref, if the child's ``on_start`` raises (the child has then exited), or if
    ``on_start`` does not return within ``start_timeout`` seconds (the child is then asked to
    stop and abandoned: ``on_abandon`` is called, ``child_abandoned`` logged). An actor type
    that does not override ``on_start`` is not waited for: nothing can fail there.
    """
    ack = StartAck()
    link = ChildLink(notify, start_ack=ack)
    try:
        ref = start_linked(link, start)
    except Exception as exc:
        raise ChildStartError(child_id, repr(exc)) from exc
    actor = link.actor
    assert actor is not None  # start_linked returned the ref of the actor that claimed the link
    if type(actor).on_start is pykka.Actor.on_start:
        return link, ref
    wait = None if math.isinf(start_timeout) else start_timeout
    if not ack.done.wait(wait):
        request_shutdown(ref)
        abandon(link, log, child_id, ref)
        raise ChildStartError(
            child_id,
            f"its on_start did not return within {start_timeout:g} s (the spec's "
            "start_timeout); it was asked to stop and abandoned. Do slow work after on_start "
            "(in a message to itself), or give the spec a longer start_timeout",
        )
    if ack.error is not None:
        link.exited.wait(wait)  # its loop ends at once; its exit notice is then stale
        raise ChildStartError(child_id, f"its on_start raised {ack.error!r}") from ack.error
    return link, ref
