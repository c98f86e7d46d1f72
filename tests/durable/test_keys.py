"""Completion keys: signed, opaque, idempotent per call; anything not issued here is refused."""

from __future__ import annotations

import base64
import json
import string
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.postgres import StoreTargets
from toolvisor.durable import CompletionKeyIssuer, DurableError, RunStore, open_store
from toolvisor.durable._keys import KeyClaims, sign_key, verify_key


@pytest.fixture
def store(store_target: str) -> Iterator[RunStore]:
    with open_store(store_target) as opened:
        opened.create_run("run-1")
        yield opened


BASE64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def with_claims(key: str, **changes: str) -> str:
    """``key`` with its claims rewritten but its signature kept."""
    version, claims, signature = key.split(".")
    body = json.loads(unb64(claims))
    body.update(changes)
    return f"{version}.{b64(json.dumps(body).encode())}.{signature}"


def flip(text: str, index: int) -> str:
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


def test_a_key_carries_its_run_and_call_and_verifies() -> None:
    secret = b"s" * 32
    key = sign_key(secret, KeyClaims("k1", "run-1", "call-1"))
    assert key.startswith("tvk1.") and key.count(".") == 2
    assert verify_key(secret, key) == KeyClaims("k1", "run-1", "call-1")
    assert verify_key(b"t" * 32, key) is None


def test_only_the_canonical_base64_spelling_verifies() -> None:
    secret = b"s" * 32
    key = sign_key(secret, KeyClaims("k1", "run-1", "call-1"))
    version, claims, signature = key.split(".")
    twin = signature[:-1] + BASE64URL[BASE64URL.index(signature[-1]) ^ 1]
    assert unb64(twin) == unb64(signature)  # base64 alone cannot tell them apart
    assert verify_key(secret, f"{version}.{claims}.{twin}") is None


def tampered_keys(key: str) -> dict[str, str]:
    version, claims, signature = key.split(".")
    return {
        "version": f"tvk2.{claims}.{signature}",
        "claims: key id": with_claims(key, k="another-key-id"),
        "claims: run id": with_claims(key, r="run-2"),
        "claims: call id": with_claims(key, c="call-2"),
        "claims: extra field": with_claims(key, x="1"),
        "claims: one character": f"{version}.{flip(claims, 5)}.{signature}",
        "signature: first character": f"{version}.{claims}.{flip(signature, 0)}",
        "signature: spare bits of the last character": f"{version}.{claims}."
        + signature[:-1]
        + BASE64URL[BASE64URL.index(signature[-1]) ^ 1],
        "signature: padded": f"{key}=",
        "signature: missing": f"{version}.{claims}.",
        "signature: truncated": key[:-1],
        "truncated to half": key[: len(key) // 2],
        "no signature part": f"{version}.{claims}",
        "extra part": f"{key}.x",
        "whitespace": f" {key}",
        "empty": "",
        "not base64": f"{version}.{claims}.{'*' * len(signature)}",
    }


@pytest.mark.parametrize("part", list(tampered_keys(sign_key(b"x", KeyClaims("k", "r", "c")))))
def test_a_tampered_key_is_refused_and_changes_nothing(
    store: RunStore, part: str
) -> None:
    key = store.issue_key("run-1", "call-1")
    store.issue_key("run-1", "call-2")  # a real key with the call id the tampering names
    tampered = tampered_keys(key)[part]
    assert tampered != key
    assert store.resolve(tampered, ok="forged") == "unknown_or_revoked"
    assert store.resolve(tampered, error="forged") == "unknown_or_revoked"
    assert store.resolution(key) is None
    assert store.resolve(key, ok="genuine") == "accepted"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(index=st.integers(min_value=0), char=st.characters(codec="ascii"))
def test_any_one_character_change_is_refused(
    store: RunStore, index: int, char: str
) -> None:
    key = store.issue_key("run-1", "call-1")
    index %= len(key)
    mutated = key[:index] + char + key[index + 1 :]
    if mutated != key:
        assert store.resolve(mutated, ok="forged") == "unknown_or_revoked"
    assert store.resolution(key) is None


def test_a_key_signed_by_another_store_is_foreign(
    store: RunStore, store_targets: StoreTargets
) -> None:
    with open_store(store_targets.fresh()) as other:
        other.create_run("run-1")
        foreign = other.issue_key("run-1", "call-1")
    own = store.issue_key("run-1", "call-1")
    assert foreign != own
    assert store.resolve(foreign, ok="x") == "unknown_or_revoked"
    assert store.resolution(own) is None
    with pytest.raises(ValueError, match="another store"):
        store.park(foreign, deadline_at=None)


def test_a_well_signed_key_this_store_never_issued_is_unknown(
    store: RunStore,
) -> None:
    never_issued = sign_key(store._db.secret, KeyClaims("made-up", "run-1", "call-1"))
    assert store.resolve(never_issued, ok="x") == "unknown_or_revoked"


def test_keys_outlive_the_store_object(store_target: str) -> None:
    with open_store(store_target) as first:
        first.create_run("r")
        key = first.issue_key("r", "c")
    with open_store(store_target) as second:
        assert second.issue_key("r", "c") == key
        assert second.resolve(key, ok=1) == "accepted"


# -- the per-call issuer ---------------------------------------------------------------------------


def test_the_issuer_gives_the_call_one_key_and_remembers_it(store: RunStore) -> None:
    issuer = CompletionKeyIssuer(store, "run-1", "call-1")
    assert issuer.issued is None
    key = issuer.issue()
    assert issuer.issue() == key and issuer.issued == key
    assert store.resolve(key, ok="done") == "accepted"  # recorded at issue time


def test_a_new_execution_of_the_call_gets_the_same_key(store: RunStore) -> None:
    key = CompletionKeyIssuer(store, "run-1", "call-1").issue()
    replay = CompletionKeyIssuer(store, "run-1", "call-1")
    assert replay.issued is None
    assert replay.issue() == key
    assert CompletionKeyIssuer(store, "run-1", "call-2").issue() != key


def test_the_issuer_says_why_it_cannot_issue(store: RunStore) -> None:
    with pytest.raises(DurableError) as no_store:
        CompletionKeyIssuer(None, "run-1", "call-1").issue()
    assert no_store.value.code == "completion_keys_unavailable"
    with pytest.raises(DurableError) as no_call:
        CompletionKeyIssuer(store, "run-1", None).issue()
    assert no_call.value.code == "completion_key_missing_call_id"
    assert "completion_key_missing_call_id" in str(no_call.value)


def test_an_unknown_error_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown DurableError code"):
        DurableError("nope", "x")  # type: ignore[arg-type]
