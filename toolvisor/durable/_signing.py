"""Signatures on what leaves the process: ``Suspended`` outcomes and stored checkpoints.

A stored checkpoint is signed ``tvs1.<base64url HMAC-SHA256>`` over its text (the scheme
completion keys use) by the store that wrote it and read back by the same store. What leaves
the process (a ``Suspended``) is signed ``tvs2.<key id>.<base64url HMAC-SHA256>``: the key id
(:func:`signing_key_id`, which reveals nothing of the key) tells a verifier holding other keys
that it was signed with another key, not altered. A ``KeyRing`` signs with its first key and
verifies with any (rotation: put the new key first, keep the old one until nothing it signed is
outstanding). A store signs with its own secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from toolvisor.contract import ToolvisorError
from toolvisor.durable._keys import b64encode

SIGNATURE_VERSION = "tvs1"
KEYED_SIGNATURE_VERSION = "tvs2"

Verdict = Literal["valid", "unsigned", "other_key", "altered"]
"""What a signature says of a text: it verifies; there is none; it names a key the verifier
does not hold; or it does not match (the text or the signature was altered)."""


class SignatureError(ToolvisorError, ValueError):
    """Data that left the process came back unsigned, altered, or signed with another key."""


@runtime_checkable
class Signer(Protocol):
    """Signs text and checks signatures (a ``KeyRing``, or a run store with its secret)."""

    def sign(self, text: str) -> str: ...

    def verify(self, text: str, signature: str) -> bool: ...

    def holds_key(self, key_id: str) -> bool:
        """Whether one of its keys has this id (:func:`signing_key_id`)."""
        ...


def sign_text(secret: bytes, text: str) -> str:
    """``text``'s signature under ``secret``."""
    mac = hmac.new(secret, f"{SIGNATURE_VERSION}.{text}".encode(), hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION}.{b64encode(mac)}"


def verify_text(secrets: Sequence[bytes], text: str, signature: object) -> bool:
    """Whether ``signature`` is ``text``'s under one of ``secrets``; never raises on bad input."""
    if not isinstance(signature, str) or not signature.startswith(f"{SIGNATURE_VERSION}."):
        return False
    return any(hmac.compare_digest(sign_text(secret, text), signature) for secret in secrets)


def signing_key_id(secret: bytes) -> str:
    """A short public name of ``secret``: an HMAC of a constant under it, so it tells keys
    apart without revealing anything of them."""
    return b64encode(hmac.new(secret, b"toolvisor signing key id", hashlib.sha256).digest()[:9])


def sign_keyed(secret: bytes, text: str) -> str:
    """``text``'s signature under ``secret``, naming the key it was made with."""
    head = f"{KEYED_SIGNATURE_VERSION}.{signing_key_id(secret)}"
    mac = hmac.new(secret, f"{head}.{text}".encode(), hashlib.sha256).digest()
    return f"{head}.{b64encode(mac)}"


def signature_key_id(signature: object) -> str | None:
    """The key id a keyed signature names; ``None`` for anything else."""
    if not isinstance(signature, str):
        return None
    parts = signature.split(".")
    if len(parts) != 3 or parts[0] != KEYED_SIGNATURE_VERSION or not parts[1]:
        return None
    return parts[1]


def verify_keyed(secrets: Sequence[bytes], text: str, signature: object) -> bool:
    """Whether ``signature`` is ``text``'s keyed signature under one of ``secrets``; never
    raises on bad input."""
    named = signature_key_id(signature)
    return named is not None and any(
        signing_key_id(secret) == named and hmac.compare_digest(sign_keyed(secret, text),
                                                        str(signature))
        for secret in secrets)


def verdict(signer: Signer, text: str, signature: str | None) -> Verdict:
    """How ``signature`` stands for ``text`` under ``signer``'s keys."""
    if signature is None:
        return "unsigned"
    if signer.verify(text, signature):
        return "valid"
    named = signature_key_id(signature)
    return "other_key" if named is not None and not signer.holds_key(named) else "altered"


def require_signed(signer: Signer, text: str, signature: str | None) -> None:
    """Refuse, with a ``SignatureError`` that says why, a ``Suspended`` (its ``text`` and
    ``signature``) that ``signer`` cannot vouch for."""
    match verdict(signer, text, signature):
        case "unsigned":
            raise SignatureError("this Suspended is unsigned: only what an agent returned "
                                 "(signed) is resumed")
        case "other_key":
            raise SignatureError(
                "this Suspended was signed with another key than this agent's (it was not "
                "altered): agents resume each other's runs when they share keys, "
                "Agent(durability=Durability(signing_keys=[...])) with the same keys (newest "
                "first), or a common "
                "store; without either, each agent signs with a random key of its own")
        case "altered":
            raise SignatureError("this Suspended was altered since an agent gave it out (its "
                                 "signature does not match what it says); it is not resumed")


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
        self._ids = frozenset(signing_key_id(key) for key in self._keys)

    def sign(self, text: str) -> str:
        return sign_keyed(self._keys[0], text)

    def verify(self, text: str, signature: str) -> bool:
        return verify_keyed(self._keys, text, signature)

    def holds_key(self, key_id: str) -> bool:
        return key_id in self._ids

    def __repr__(self) -> str:
        return f"KeyRing({len(self._keys)} keys)"  # never the keys themselves
