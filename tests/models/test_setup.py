"""Building adapters: model strings, the SDK imported only when used, and the provider's
``retry-after`` read as toolvisor's ``retry_after``."""

from __future__ import annotations

import email.utils
import re
import sys
import threading
import time

import pytest

from tests.support.provider_server import ProviderServer
from tests.support.provider_wire import ChatWire, Turn
from toolvisor import Agent, Completed
from toolvisor.contract import ModelRequest, ModelResponse
from toolvisor.models import (
    AnthropicModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    from_string,
)
from toolvisor.models._errors import retry_after


@pytest.mark.parametrize(("spec", "kind", "name"), [
    ("openai:gpt-4.1-mini", OpenAIChatModel, "gpt-4.1-mini"),
    ("openai-responses:gpt-4.1-mini", OpenAIResponsesModel, "gpt-4.1-mini"),
    ("anthropic:claude-sonnet-4-5", AnthropicModel, "claude-sonnet-4-5"),
    ("openai-compatible:qwen3:8b@http://localhost:11434/v1", OpenAIChatModel, "qwen3:8b"),
])
def test_a_model_string_names_its_adapter(monkeypatch: pytest.MonkeyPatch, spec: str,
                                          kind: type, name: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    model = from_string(spec, stream=True, temperature=0)
    assert type(model) is kind
    assert (model.model, model.stream, model.settings) == (name, True, {"temperature": 0})


def test_an_openai_compatible_string_points_the_client_at_its_server() -> None:
    model = from_string("openai-compatible:llama3@http://127.0.0.1:8080/v1")
    assert str(model.client.base_url) == "http://127.0.0.1:8080/v1/"


@pytest.mark.parametrize("spec", ["gpt-4", "mistral:large", "openai-compatible:llama3",
                                  "openai-compatible:llama3@localhost:8080"])
def test_a_bad_model_string_is_refused_with_the_forms_it_takes(spec: str) -> None:
    with pytest.raises(ValueError, match=r"provider|openai-compatible"):
        from_string(spec)


def test_an_agent_takes_a_model_string(provider: ProviderServer,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{provider.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    provider.script(ChatWire().reply(Turn(text="hi from the wire")))
    with Agent("openai:gpt-test") as agent:
        outcome = agent.run("hello")
    assert isinstance(outcome, Completed) and outcome.text == "hi from the wire"
    assert provider.requests[0].body["model"] == "gpt-test"
    assert provider.requests[0].headers["authorization"] == "Bearer from-env"


def test_an_adapter_without_its_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if not installed
    hint = "pip install '.[anthropic]' in toolvisor's clone"
    with pytest.raises(ImportError, match=re.escape(hint)):
        AnthropicModel("claude-sonnet-4-5")


def test_retry_after_reads_milliseconds_seconds_and_dates() -> None:
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "3"}) == 3.0
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (retry_after({"retry-after": date}) or 0) <= 30
    assert retry_after({"retry-after": email.utils.formatdate(0, usegmt=True)}) == 0.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({"retry-after": "inf"}) is None
    assert retry_after({}) is None


def test_an_agent_closes_its_models_connections_on_the_loop_they_live_on() -> None:
    class Closing:
        closed_on: str | None = None

        async def arespond(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text="hi")

        async def aclose(self) -> None:
            self.closed_on = threading.current_thread().name

    model = Closing()
    with Agent(model) as agent:
        assert agent.run("hello").text == "hi"  # type: ignore[union-attr]
    assert model.closed_on == "toolvisor-asyncio"
