"""One public API, drawn once in ``docs/api.md``: each public module's ``__all__`` is the table
under its heading, and the README, ``docs/`` and ``examples/`` import from those modules only,
and only the names listed there."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import toolvisor
from toolvisor import machine

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
_CODE = re.compile(r"```(?:python|py)\n(.*?)```", flags=re.DOTALL)


def documented() -> dict[str, list[str]]:
    """The names listed under each ``## `module` `` heading: the first cell of its table rows."""
    modules: dict[str, list[str]] = {}
    names: list[str] | None = None
    for line in API.read_text().splitlines():
        if line.startswith("## "):
            heading = re.fullmatch(r"## `(toolvisor(?:\.\w+)*)`", line)
            names = modules.setdefault(heading[1], []) if heading else None
        elif names is not None and line.startswith("| ") and not line.startswith("| names"):
            names += re.findall(r"`(\w+)`", line.split(" | ")[0])
    return modules


PUBLIC = documented()


def sources() -> list[tuple[str, str]]:
    """Every Python block of the README and ``docs/``, and every example, by where it is."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, block in enumerate(_CODE.findall(page.read_text())):
            found.append((f"{page.relative_to(ROOT)} block {number}", block))
    for example in sorted((ROOT / "examples").glob("*.py")):
        found.append((str(example.relative_to(ROOT)), example.read_text()))
    return found


def violations(source: str) -> list[str]:
    """The imports of toolvisor in ``source`` that reach past the public API."""
    wrong = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            wrong += [f"import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "toolvisor" and a.name not in PUBLIC]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "toolvisor":
            module = node.module or ""
            if module not in PUBLIC:
                wrong.append(f"from {module} import ...: not a public module")
                continue
            wrong += [f"from {module} import {a.name}: not listed under it" for a in node.names
                      if a.name not in PUBLIC[module]]
    return wrong


def test_the_page_lists_the_top_level_and_the_named_modules() -> None:
    assert {"toolvisor", "toolvisor.testing", "toolvisor.models", "toolvisor.mcp",
            "toolvisor.durable", "toolvisor.observe", "toolvisor.ray"} <= set(PUBLIC)
    for module, names in PUBLIC.items():
        assert len(names) == len(set(names)), f"{module}: a name listed twice"


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_a_public_module_exports_what_the_page_lists(module: str) -> None:
    exported = importlib.import_module(module).__all__
    missing = sorted(set(exported) - set(PUBLIC[module]))
    extra = sorted(set(PUBLIC[module]) - set(exported))
    assert (missing, extra) == ([], []), (
        f"{module}: exported but not in docs/api.md: {missing}; in docs/api.md but not "
        f"exported: {extra}. Add each public name to the table under `{module}`, or take it out")
    for name in exported:
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


@pytest.mark.parametrize(("where", "source"), sources(), ids=[w for w, _ in sources()])
def test_the_docs_and_examples_import_only_the_public_api(where: str, source: str) -> None:
    assert violations(source) == [], f"{where} imports past the public API (docs/api.md)"


def test_the_check_sees_an_import_past_the_public_api() -> None:
    assert violations("from toolvisor.machine import RetryPolicy\nimport toolvisor.host\n"
                      "from toolvisor import LlmCall, Agent\nimport os, toolvisor.testing\n") == [
        "from toolvisor.machine import ...: not a public module", "import toolvisor.host",
        "from toolvisor import LlmCall: not listed under it"]


def test_the_policies_come_from_the_top_level_and_engine_types_stay_in_their_packages() -> None:
    policies = {"RetryPolicy", "ContinueRun", "HaltRun", "RetryAfter", "ModelRetryPolicy",
                "FailRun"}
    assert {name: getattr(toolvisor, name) for name in policies} == {
        name: getattr(machine, name) for name in policies}
    engine = {"TurnMachine", "LlmCall", "Slept", "EffectId", "ToolCalls", "Checkpoint"}
    assert engine <= set(machine.__all__)
    assert not engine & {name for names in PUBLIC.values() for name in names}
