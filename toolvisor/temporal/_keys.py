"""Completion keys on Temporal: what ``ctx.completion_key()`` gives a call, naming its run
(the workflow id), its turn, attempt and call id, so the system that holds the key completes
the call with it alone (``complete_key``)."""

from __future__ import annotations

import base64
import binascii
import json

PREFIX = "tvt1."


def completion_key(run_id: str, turn: int, attempt: int, call_id: str) -> str:
    """The key of one attempt of one call of run ``run_id`` (opaque, URL-safe text)."""
    text = json.dumps([run_id, turn, attempt, call_id], separators=(",", ":"))
    return PREFIX + base64.urlsafe_b64encode(text.encode()).decode()


def parse_key(key: str) -> tuple[str, int, int, str]:
    """The run id, turn, attempt and call id :func:`completion_key` put in ``key``;
    ``ValueError`` naming it for any other text."""
    try:
        if not isinstance(key, str) or not key.startswith(PREFIX):
            raise ValueError("no prefix")
        run_id, turn, attempt, call_id = json.loads(base64.urlsafe_b64decode(key[len(PREFIX):]))
        if not (isinstance(run_id, str) and isinstance(call_id, str)
                and isinstance(turn, int) and isinstance(attempt, int)):
            raise ValueError("wrong parts")
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ValueError(f"{str(key)[:40]!r} is no completion key of a run on Temporal: give "
                         "the text ctx.completion_key() returned in the call") from exc
    return run_id, turn, attempt, call_id
