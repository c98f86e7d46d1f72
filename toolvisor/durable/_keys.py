"""Completion key format: ``tvk1.<claims>.<signature>``, HMAC-SHA256 under the store's secret.

``claims`` is base64url (unpadded) of canonical JSON ``{"c": call_id, "k": key_id, "r": run_id}``;
``signature`` is base64url of HMAC-SHA256 over ``"tvk1." + claims``. The key is opaque to its
holders: they pass the whole string back. Verification never raises on bad input; anything
that is not a well-formed key signed by this secret yields ``None``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

KEY_VERSION = "tvk1"
_SIGNATURE_BYTES = 32


@dataclass(frozen=True, slots=True)
class KeyClaims:
    """What a verified key says: its id and the run and call whose wait it names."""

    key_id: str
    run_id: str
    call_id: str


def b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes | None:
    if not text or not text.isascii():
        return None
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    # base64 ignores the spare low bits of the last character: only the canonical spelling
    # of the bytes is accepted, so no two strings name the same key.
    return data if b64encode(data) == text else None


def _signature(secret: bytes, signed: str) -> bytes:
    return hmac.new(secret, signed.encode("ascii"), hashlib.sha256).digest()


def sign_key(secret: bytes, claims: KeyClaims) -> str:
    """The key string for ``claims``, signed with ``secret``."""
    body = json.dumps(
        {"c": claims.call_id, "k": claims.key_id, "r": claims.run_id},
        sort_keys=True,
        separators=(",", ":"),
    )
    signed = f"{KEY_VERSION}.{b64encode(body.encode('utf-8'))}"
    return f"{signed}.{b64encode(_signature(secret, signed))}"


def verify_key(secret: bytes, key: str) -> KeyClaims | None:
    """The claims of ``key`` if it is well formed and signed with ``secret``, else ``None``.

    The signature is checked (in constant time) before the claims are parsed.
    """
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != KEY_VERSION:
        return None
    signature = _b64decode(parts[2])
    if signature is None or len(signature) != _SIGNATURE_BYTES:
        return None
    signed = f"{parts[0]}.{parts[1]}"
    if not signed.isascii() or not hmac.compare_digest(signature, _signature(secret, signed)):
        return None
    raw = _b64decode(parts[1])
    if raw is None:
        return None
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(body, dict) or set(body) != {"c", "k", "r"}:
        return None
    if not all(isinstance(body[field], str) for field in ("c", "k", "r")):
        return None
    return KeyClaims(key_id=body["k"], run_id=body["r"], call_id=body["c"])
