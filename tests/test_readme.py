"""Every Python example in the README runs as written; a real model's requests go to the local
provider server, which answers as OpenAI would. The OTLP block runs against a local OTLP/HTTP
receiver."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._otlp_receiver import OtlpReceiver
from tests._provider_server import ProviderServer
from tests._provider_wire import ChatWire, Turn
from toolvisor import Agent, function_tool
from toolvisor.testing import ScriptedModel, call, calls

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
(OTLP_BLOCK,) = [block for block in re.findall(r"```py\n(.*?)```", README.read_text(),
                                               flags=re.DOTALL) if "OTLPSpanExporter" in block]
OTLP_ENDPOINT = '"http://localhost:4318/v1/traces"'


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(source: str, provider: ProviderServer,
                             monkeypatch: pytest.MonkeyPatch, ray_cluster: ModuleType) -> None:
    """``ray_cluster``: a ``ray`` example runs on the session's cluster, not one of its own."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"{provider.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "readme-key")
    provider.script(*[ChatWire().reply(Turn(text="Hello from the wire."))] * 3)
    exec(compile(source, str(README), "exec"), {"__name__": "readme_example"})


@function_tool
def weather(city: str) -> dict[str, Any]:
    """Today's weather in a city."""
    return {"city": city, "celsius": 21}


def test_the_readme_otlp_block_sends_the_run_to_a_collector() -> None:
    """The block as written, but for the endpoint: the receiver's, in place of localhost:4318."""
    assert OTLP_ENDPOINT in OTLP_BLOCK
    model = ScriptedModel([calls(call("weather", {"city": "Lisbon"}, id="w")), "Sunny, 21 C."])
    with OtlpReceiver() as receiver:
        source = OTLP_BLOCK.replace(OTLP_ENDPOINT, repr(receiver.url))
        namespace: dict[str, Any] = {"Agent": Agent, "model": model, "tools": [weather]}
        exec(compile(source, str(README), "exec"), namespace)
    assert namespace["outcome"].text == "Sunny, 21 C."
    assert sorted(span.name for span in receiver.spans) == [
        "chat ScriptedModel", "chat ScriptedModel", "execute_tool weather",
        "invoke_agent travel"]
    by_name = {span.name: span for span in receiver.spans}
    assert {span.service for span in receiver.spans} == {"travel-agent"}
    run, tool_call = by_name["invoke_agent travel"], by_name["execute_tool weather"]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "travel"
    assert run.attributes["toolvisor.run.outcome"] == "completed"
    assert tool_call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_call.attributes["gen_ai.tool.name"] == "weather"
    assert tool_call.attributes["gen_ai.tool.call.id"] == "w"
    assert tool_call.attributes["toolvisor.call.outcome"] == "ok"


def test_the_readme_s_images_are_committed() -> None:
    """The live view's picture (``python -m examples.demo --svg docs/live-view.svg``)."""
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text())
    assert "docs/live-view.svg" in images
    for image in images:
        drawn = (README.parent / image).read_text()
        assert drawn.startswith("<svg"), image
    live_view = (README.parent / "docs/live-view.svg").read_text().replace("&#160;", " ")
    assert all(shown in live_view for shown in ("restarts:", "run ", "book", "completed"))
