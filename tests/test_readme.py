"""Every Python example in the README runs as written; a real model's requests go to the local
provider server, which answers as OpenAI would."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from tests._provider_server import ProviderServer
from tests._provider_wire import ChatWire, Turn

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


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
