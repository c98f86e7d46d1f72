"""``examples/real_model.py`` runs unattended: against the local provider server as if it were
an OpenAI-compatible one, and without any key (it says how to get one and exits 0)."""

from __future__ import annotations

import pytest

from examples import real_model
from tests.support.provider_server import ProviderServer, Reply
from tests.support.provider_wire import Call, ChatWire, Turn

KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")


def test_without_a_key_it_says_how_to_point_it_at_a_local_server(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    assert real_model.main() == 0
    assert "OPENAI_BASE_URL=http://localhost:11434/v1" in capsys.readouterr().out


def test_one_supervised_run_against_an_openai_compatible_server(
        provider: ProviderServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{provider.url}/v1")
    monkeypatch.setenv("OPENAI_MODEL", "qwen3:8b")
    monkeypatch.setitem(real_model.crashes, "left", 1)
    wire = ChatWire()
    provider.script(
        wire.stream(Turn(text="On it.", calls=(
            Call("s", "stock", '{"warehouse": "north"}'), Call("p", "price", '{"item": "widget"}'),
            Call("o", "order", '{"item": "widget", "quantity": 3}')))),
        wire.stream(Turn(text="North has 40 widgets; pricing timed out; 3 ordered.")))
    assert real_model.main() == 0
    out = capsys.readouterr().out
    assert "On it." in out and "North has 40 widgets" in out
    assert "stock  attempt 1: retry" in out and "stock  attempt 2: ok" in out
    assert "price  attempt 1: error" in out
    assert "order asks: Order 3 x widget? -> the human says yes" in out
    assert "Completed after 2 turns" in out
    assert "policies: 1 crashed call(s) retried in a fresh actor" in out
    assert "timeouts: 1 call(s) past their deadline" in out
    assert provider.requests[0].headers["authorization"] == "Bearer not-needed"
    assert provider.requests[0].body["model"] == "qwen3:8b"
    results = wire.results(provider.requests[1].body)
    assert results["o"] == ("yes", False) and "timeout" in results["p"][0]


def test_a_model_call_that_fails_says_why_and_nothing_of_tools_that_never_ran(
        provider: ProviderServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{provider.url}/v1")
    provider.script(Reply(status=401, body={"error": {
        "message": "Incorrect API key provided", "type": "invalid_request_error"}}))
    assert real_model.main() == 1
    out = capsys.readouterr().out
    assert "model call 1 failed (rejected: HTTP 401: Incorrect API key provided)" in out
    assert ("the run failed: the model call failed (rejected) after 1 attempt: HTTP 401: "
            "Incorrect API key provided") in out
    assert "Failed after 1 turns" in out
    assert not any(word in out for word in ("supervisor:", "policies:", "timeouts:"))
