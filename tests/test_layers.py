"""Each layer imports only the layers above it (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "toolvisor"
# Top to bottom; a module may import its own layer and the layers above it, never below.
LAYERS = [
    {"contract"},
    {"_logging", "executor"},
    {"supervisors"},
    {"machine"},
    {"durable", "registry"},
    {"actors"},
    {"testing", "agent"},
    {"cli"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def layer_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def imported_layers(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            parts = name.split(".")
            if parts[0] == "toolvisor" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_every_module_belongs_to_a_layer() -> None:
    modules = [p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE]
    assert {layer_of(p) for p in modules} <= set(RANK)


def test_no_module_imports_a_layer_below_its_own() -> None:
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE and path.name == "__init__.py":
            continue  # the public face re-exports every layer
        own = RANK[layer_of(path)]
        for layer in imported_layers(path):
            if RANK[layer] > own:
                wrong.append(f"{path.relative_to(PACKAGE)} imports toolvisor.{layer}")
    assert wrong == []


def test_contract_imports_no_threads_or_actors() -> None:
    for path in (PACKAGE / "contract").rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                   for a in n.names}
        modules |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom)}
        assert not modules & {"pykka", "threading", "multiprocessing", "asyncio", "sqlite3"}, path
