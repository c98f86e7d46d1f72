"""A call's idempotency key (``ctx.idempotency_key``): one value per call of a run, the same for
every attempt of it and after a resume, for a handler to pass to an external API.

It is a hash of the run id, the turn and the model's call id, the three things every attempt
of a call and every resume of its run share, and no two calls of any run share: so a retry the
runtime makes is one effect on the other side. It reveals nothing but itself (no signing key,
no store path) and needs no store.
"""

from __future__ import annotations

import hashlib


def idempotency_key(run_id: str, turn: int | None, call_id: str) -> str:
    """The key of call ``call_id`` of ``turn`` in run ``run_id``: 64 hex digits."""
    text = f"toolvisor-idempotency\x00{run_id}\x00{turn}\x00{call_id}"
    return hashlib.sha256(text.encode()).hexdigest()
