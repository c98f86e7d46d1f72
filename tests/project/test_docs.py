"""Every Python example of the guides in docs/ runs as written, as the README's do (see
``tests/support/doc_blocks.py``); the observability guide's OTLP fragment sends a run to a local
OTLP/HTTP receiver. Links between the README and the guides lead to files that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

from tests.support.doc_blocks import GUIDES, README, ROOT, blocks, kinds, run_block
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.provider_server import ProviderServer
from toolvisor import Agent, Ok, tool
from toolvisor.testing import ScriptedModel, call, calls

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.machine_wide  # the guides run Ray and sandboxed tools

BLOCKS = [(guide, i, source) for guide in GUIDES
          for i, source in enumerate(blocks(guide, "python"))]
KINDS = kinds([source for _, _, source in BLOCKS])
OBSERVABILITY = ROOT / "docs" / "observability.md"
OTLP_ENDPOINT = '"http://localhost:4318/v1/traces"'
GUIDE_NAMES = ("tools", "policies", "durability", "isolation", "sandbox", "providers", "mcp",
               "ray", "observability", "testing", "adapters")


def test_every_guide_is_there_and_has_examples() -> None:
    by_guide = {guide.stem: blocks(guide, "python") for guide in GUIDES}
    assert all(by_guide.get(name) for name in GUIDE_NAMES), by_guide.keys()


def test_no_fragment_is_left_unrun() -> None:
    """A ```py block needs names from its reader; the only one is the OTLP block below."""
    fragments = {guide.name: blocks(guide, "py") for guide in GUIDES}
    assert {name: len(found) for name, found in fragments.items() if found} == {
        "observability.md": 1}


def cases(kind: str) -> list[Any]:
    return [pytest.param(BLOCKS[n][0], BLOCKS[n][2], id=f"{BLOCKS[n][0].stem}-{BLOCKS[n][1]}")
            for n in KINDS[kind]]


@pytest.mark.parametrize(("guide", "source"), cases("plain"))
def test_guide_example_runs(guide: Path, source: str, provider: ProviderServer,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    run_block(source, guide, provider, monkeypatch)


@pytest.mark.parametrize(("guide", "source"), cases("ray"))
def test_guide_ray_example_runs(guide: Path, source: str, provider: ProviderServer,
                                monkeypatch: pytest.MonkeyPatch, ray_cluster: ModuleType) -> None:
    """On the session's cluster, not one of the example's own."""
    run_block(source, guide, provider, monkeypatch)


@pytest.mark.parametrize(("guide", "source"), cases("pytest"))
def test_guide_test_module_passes(guide: Path, source: str, provider: ProviderServer,
                                  monkeypatch: pytest.MonkeyPatch, pytester: Any) -> None:
    run_block(source, guide, provider, monkeypatch, pytester)


class City(BaseModel):
    city: str


@tool
def weather(arguments: City) -> Ok:
    """Today's weather in a city."""
    return Ok({"city": arguments.city, "celsius": 21})


def test_the_isolation_guide_s_first_example_runs_pasted_into_a_script(tmp_path: Path) -> None:
    """Its ``process`` tools start workers, which import the script again: run as a reader
    would, from the clone, it keeps its agent under the ``__main__`` guard and runs whole."""
    script = tmp_path / "isolation_example.py"
    script.write_text(blocks(ROOT / "docs" / "isolation.md", "python")[0])
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    ran = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=False,
                         env={**os.environ, "PYTHONPATH": path})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == (
        "{'hung': 'timeout', 'dies': 'handler_exit', 'slow': 'timeout'}")


def test_the_otlp_block_sends_the_run_to_a_collector() -> None:
    """The block as written, but for the endpoint: the receiver's, in place of localhost:4318."""
    (block,) = blocks(OBSERVABILITY, "py")
    assert OTLP_ENDPOINT in block
    model = ScriptedModel([calls(call("weather", {"city": "Lisbon"}, id="w")), "Sunny, 21 C."])
    with OtlpReceiver() as receiver:
        source = block.replace(OTLP_ENDPOINT, repr(receiver.url))
        namespace: dict[str, Any] = {"Agent": Agent, "model": model, "tools": [weather]}
        exec(compile(source, str(OBSERVABILITY), "exec"), namespace)
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


_LINK = re.compile(r"\]\(([^)\s]*)\)")
_HEADING = re.compile(r"^#+ (.+)$", flags=re.MULTILINE)
_CODE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens."""
    headings = _HEADING.findall(_CODE.sub("", page.read_text()))
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", [README, *GUIDES], ids=lambda page: page.name)
def test_links_lead_to_what_exists(page: Path) -> None:
    """A relative link names a file of the repository, and a heading of it when it has an
    anchor (docs/api.md is written elsewhere, so its anchors are not checked)."""
    broken = []
    for link in _LINK.findall(_CODE.sub("", page.read_text())):
        if "://" in link:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(link)
            continue
        if anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(link)
    assert broken == []
