"""Stopping one child: ask it, wait up to its grace, abandon it past that."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from pykka import ActorRef

from toolvisor._logging import EventLog
from toolvisor.supervisors._spec import Shutdown
from toolvisor.supervisors._supervised import ChildLink, describe, request_shutdown


def await_exit(link: ChildLink, shutdown: Shutdown, timeout: float | None = None) -> bool:
    """Wait for the child to exit within its grace (or ``timeout`` if given); ``True`` if it did."""
    if shutdown == "brutal_kill":
        return link.exited.is_set()
    grace = shutdown if timeout is None else min(shutdown, timeout)
    return link.exited.wait(None if grace == float("inf") else grace)


def abandon(link: ChildLink, log: EventLog, child_id: Hashable, ref: ActorRef[Any]) -> None:
    """Give up on a child that did not stop: call its ``on_abandon`` and log ``child_abandoned``.

    The child's late exit notice is ignored by the caller (the link is forgotten).
    """
    actor = link.actor
    try:
        if actor is not None:
            actor.on_abandon()
    except Exception as exc:
        log.error("on_abandon_failed", child_id=child_id, child_urn=ref.actor_urn, error=repr(exc))
    log.warning("child_abandoned", child_id=child_id, child_urn=ref.actor_urn)


def stop_child(
    link: ChildLink, ref: ActorRef[Any], shutdown: Shutdown, log: EventLog, child_id: Hashable
) -> bool:
    """Stop one child as OTP's shutdown does; ``True`` if it exited, ``False`` if abandoned."""
    request_shutdown(ref)
    if await_exit(link, shutdown):
        log.info("child_exited", child_id=child_id, child_urn=ref.actor_urn,
                 reason=describe(link.reason))
        return True
    abandon(link, log, child_id, ref)
    return False
