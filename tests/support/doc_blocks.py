"""The code blocks of the README and of the guides in docs/, and how a test runs each one.

A ```python block is a whole program: it runs as written, as a script (``__name__`` is
``"__main__"``), in a namespace of its own, with a
real model's requests sent to the local provider server (which answers as OpenAI would) and a
``ray`` tool on the session's cluster. A block that defines ``test_`` functions is a test module
and runs under pytest. A ```py block is a fragment that needs names from its reader (``model``,
``tools``); each one has a test of its own, which gives it them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.provider_server import ProviderServer
from tests.support.provider_wire import ChatWire, Turn

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
_TEST_FUNCTION = re.compile(r"^def (test_\w+)\(", flags=re.MULTILINE)


def blocks(path: Path, language: str) -> list[str]:
    """The text of every block of ``path`` fenced as ``language``, in order."""
    return [body for lang, body in _FENCE.findall(path.read_text()) if lang == language]


def uses_ray(source: str) -> bool:
    """Whether a block runs a tool on a Ray cluster (its test then takes ``ray_cluster``)."""
    return 'isolation="ray"' in source or "RayActor" in source


def is_test_module(source: str) -> bool:
    """Whether a block is a test module (its test then takes ``pytester``)."""
    return _TEST_FUNCTION.search(source) is not None


def kinds(sources: list[str]) -> dict[str, list[int]]:
    """The indices of ``sources`` by how each runs: ``ray``, ``pytest`` or ``plain``."""
    found: dict[str, list[int]] = {"plain": [], "ray": [], "pytest": []}
    for i, source in enumerate(sources):
        kind = "ray" if uses_ray(source) else "pytest" if is_test_module(source) else "plain"
        found[kind].append(i)
    return found


def run_block(source: str, path: Path, provider: ProviderServer,
              monkeypatch: pytest.MonkeyPatch, pytester: Any = None) -> None:
    """Run one ```python block as its reader would, against local stand-ins for the network.

    The fixtures are the test's own arguments, so the session's services (the provider
    server, the Ray cluster) start before the test's leak check takes its snapshot.
    """
    monkeypatch.setenv("OPENAI_BASE_URL", f"{provider.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "docs-key")
    provider.script(*[ChatWire().reply(Turn(text="Hello from the wire."))] * 3)
    if pytester is not None:
        pytester.makepyfile(source)
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
        result.assert_outcomes(passed=len(_TEST_FUNCTION.findall(source)))
        return
    # as a script: a block that runs its agent under `if __name__ == "__main__":` runs it here
    exec(compile(_at_its_line(source, path), str(path), "exec"), {"__name__": "__main__"})


def _at_its_line(source: str, path: Path) -> str:
    """``source`` moved down to where it stands in ``path``, so a traceback names the line of
    the page."""
    before = path.read_text().index(source)
    return "\n" * path.read_text().count("\n", 0, before) + source
