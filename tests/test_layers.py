"""Each layer imports only the layers beneath it (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "toolvisor"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SECTION = "Layers"

_BASE = {"contract", "_logging"}
_SERVICES = _BASE | {"executor", "durable", "supervisors"}
_LOOP = _SERVICES | {"machine", "registry", "resilience"}
# What each layer may import besides itself. Layers side by side (executor, durable,
# supervisors and models; machine, registry and resilience) never import each other, the
# per-call actors know nothing of runs (no machine, no store, no catalog), and the provider
# adapters nothing that hosts runs.
MAY_IMPORT: dict[str, set[str]] = {
    "contract": set(),
    "_logging": set(),
    "executor": _BASE,
    "durable": _BASE,
    "supervisors": _BASE,
    "models": _BASE,
    "machine": _BASE | {"executor"},
    "registry": _BASE | {"executor"},
    "resilience": _BASE,
    "actors": _BASE | {"executor", "supervisors"},
    "mcp": _SERVICES | {"registry", "actors"},
    "host": _LOOP | {"actors", "models"},
    "agent": _LOOP | {"actors", "host", "mcp", "models"},
    "observe": _BASE,
    "ray": {"contract"},
    "testing": _LOOP | {"actors", "host", "agent", "models"},
    "cli": _SERVICES | {"mcp"},
}


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


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


def modules() -> list[Path]:
    """Every module but the package's public face, which re-exports every layer."""
    return [p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"]


def test_every_module_belongs_to_a_layer() -> None:
    assert {layer_of(p) for p in modules()} <= set(MAY_IMPORT)


def test_no_module_imports_a_layer_it_may_not() -> None:
    wrong = []
    for path in modules():
        own = layer_of(path)
        for layer in imported_layers(path) - {own}:
            if layer not in MAY_IMPORT[own]:
                wrong.append(f"{path.relative_to(PACKAGE)} imports toolvisor.{layer}")
    assert wrong == []


def test_the_call_actors_know_nothing_of_runs() -> None:
    for path in (PACKAGE / "actors").rglob("*.py"):
        assert not imported_layers(path) & {"durable", "machine", "registry", "host"}, path


def private_imports(source: str, own: str) -> set[str]:
    """The private modules of other layers (``toolvisor.x._y``) that ``source``, a module of
    layer ``own``, imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            parts = name.split(".")
            if parts[0] == "toolvisor" and len(parts) > 2 and parts[1] != own \
                    and any(part.startswith("_") for part in parts[2:]):
                found.add(name)
    return found


def test_no_package_imports_another_packages_private_module() -> None:
    wrong = {str(p.relative_to(PACKAGE)): sorted(found) for p in modules()
             if (found := private_imports(p.read_text(), layer_of(p)))}
    assert wrong == {}, "import what the other package exports from its __init__.py instead"


def test_the_private_import_check_sees_one() -> None:
    source = ("from toolvisor.supervisors._supervised import ShutdownRequest\n"
              "from toolvisor.host._run import HostedRun\n"
              "import toolvisor.machine._policy\nfrom toolvisor.machine import TurnMachine\n")
    assert private_imports(source, "host") == {"toolvisor.supervisors._supervised",
                                               "toolvisor.machine._policy"}


def test_the_layers_form_no_cycle() -> None:
    depth: dict[str, int] = {}

    def visit(layer: str, seen: tuple[str, ...]) -> int:
        assert layer not in seen, f"cycle: {' -> '.join((*seen, layer))}"
        if layer not in depth:
            depth[layer] = 1 + max((visit(d, (*seen, layer)) for d in MAY_IMPORT[layer]),
                                   default=0)
        return depth[layer]

    for layer in MAY_IMPORT:
        visit(layer, ())


def test_the_architecture_doc_has_the_section_cited_here() -> None:
    headings = re.findall(r"^#+ (.+)$", ARCHITECTURE.read_text(), flags=re.MULTILINE)
    assert SECTION in headings


def test_contract_imports_no_threads_or_actors() -> None:
    for path in (PACKAGE / "contract").rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom)}
        assert not imported & {"pykka", "threading", "multiprocessing", "asyncio", "sqlite3"}, path


def test_no_module_is_over_500_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}, "split these along their seams"
