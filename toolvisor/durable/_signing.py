"""Signatures on what leaves the process: ``Suspended`` outcomes and stored checkpoints.

``tvs1.<base64url HMAC-SHA256>`` over the signed text, the scheme completion keys use. A
``KeyRing`` signs with its first key and verifies with any (rotation: put the new key first,
keep the old one until nothing it signed is outstanding). A store signs with its own secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from toolvisor.contract import ToolvisorError
from toolvisor.durable._keys import b64encode

SIGNATURE_VERSION = "tvs1"


class SignatureError(ToolvisorError, ValueError):
    """Data that left the process came back unsigned, altered, or signed with another key."""


@runtime_checkable
class Signer(Protocol):
    """Signs text and checks signatures (a ``KeyRing``, or a session store with its secret)."""

    def sign(self, text: str) -> str: ...

    def verify(self, text: str, signature: str) -> bool: ...


def sign_text(secret: bytes, text: str) -> str:
    """``text``'s signature under ``secret``."""
    mac = hmac.new(secret, f"{SIGNATURE_VERSION}.{text}".encode(), hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION}.{b64encode(mac)}"


def verify_text(secrets: Sequence[bytes], text: str, signature: object) -> bool:
    """Whether ``signature`` is ``text``'s under one of ``secrets``; never raises on bad input."""
    if not isinstance(signature, str) or not signature.startswith(f"{SIGNATURE_VERSION}."):
        return False
    return any(hmac.compare_digest(sign_text(secret, text), signature) for secret in secrets)


class KeyRing:
    """Signing keys: the first signs, any verifies. Keys are bytes of at least 16."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if isinstance(keys, bytes | str) or not keys:
            raise ValueError("signing_keys must be a non-empty sequence of bytes keys, newest "
                             "first")
        for key in keys:
            if not isinstance(key, bytes) or len(key) < 16:
                raise ValueError(f"a signing key must be at least 16 bytes (e.g. "
                                 f"secrets.token_bytes(32)), got {type(key).__name__}")
        self._keys = tuple(keys)

    def sign(self, text: str) -> str:
        return sign_text(self._keys[0], text)

    def verify(self, text: str, signature: str) -> bool:
        return verify_text(self._keys, text, signature)

    def __repr__(self) -> str:
        return f"KeyRing({len(self._keys)} keys)"  # never the keys themselves
