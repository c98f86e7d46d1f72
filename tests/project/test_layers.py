"""The layer table of docs/architecture.md ("Layers") is the import graph, and it is kept.

The table's "imports" column is read here: a module may import only what its row lists, every
name a row lists is imported by some package of that row, and no package reaches into another
package's private modules or names. Inside each package the modules import one another one way:
no cycle, counting the imports under ``if TYPE_CHECKING:`` and those inside functions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "toolvisor"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SECTION = "Layers"
_HEADER = "| layer | owns | imports |"


def _names(cell: str) -> list[str]:
    """The layers a table cell names in backticks (``agent.py`` is the layer ``agent``)."""
    return [name.removesuffix(".py") for name in re.findall(r"`([^`]+)`", cell)]


def layer_table() -> list[tuple[list[str], set[str]]]:
    """The rows of the layer table: the layers of each row, and what the row says they import."""
    text = ARCHITECTURE.read_text()
    section = text.split(f"\n## {SECTION}\n", 1)[1].split("\n## ", 1)[0]
    lines = section[section.index(_HEADER):].splitlines()[2:]  # past the header and its rule
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        layers, _owns, imports = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((_names(layers), set(_names(imports))))
    return rows


def may_import() -> dict[str, set[str]]:
    """What each layer may import besides itself: its row's "imports" column."""
    return {layer: imports for layers, imports in layer_table() for layer in layers}


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def toolvisor_imports(path: Path) -> Iterator[tuple[list[str], str | None]]:
    """Each toolvisor module ``path`` imports, as its dotted parts, with the name taken from it
    (``from m import name``; ``None`` for ``import m``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "toolvisor":
                    yield alias.name.split("."), None
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "toolvisor":
            assert node.module is not None
            for alias in node.names:
                if node.module == "toolvisor":  # from toolvisor import durable
                    yield ["toolvisor", alias.name], None
                else:
                    yield node.module.split("."), alias.name


def imported_layers(path: Path) -> set[str]:
    return {parts[1] for parts, _ in toolvisor_imports(path) if len(parts) > 1}


def modules() -> list[Path]:
    """Every module but the package's public face, which re-exports every layer."""
    return [p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"]


def test_the_architecture_doc_has_the_section_cited_here() -> None:
    headings = re.findall(r"^#+ (.+)$", ARCHITECTURE.read_text(), flags=re.MULTILINE)
    assert SECTION in headings


def test_the_table_names_every_layer_once() -> None:
    named = [layer for layers, _ in layer_table() for layer in layers]
    assert sorted(named) == sorted(set(named)), "a layer has two rows"
    assert set(named) == {layer_of(p) for p in modules()}
    for layers, imports in layer_table():
        assert imports <= set(named), f"{layers} import a layer the table does not have"


def test_layers_side_by_side_never_import_each_other() -> None:
    for layers, imports in layer_table():
        assert not imports & set(layers), f"the row {layers} lists one of its own layers"


def test_no_module_imports_a_layer_its_row_does_not_list() -> None:
    allowed = may_import()
    wrong = []
    for path in modules():
        own = layer_of(path)
        for layer in imported_layers(path) - {own}:
            if layer not in allowed[own]:
                wrong.append(f"{path.relative_to(PACKAGE)} imports toolvisor.{layer}")
    assert wrong == [], "import only what the layer table allows, or change the table"


def test_every_import_a_row_lists_is_made() -> None:
    imported: dict[str, set[str]] = {}
    for path in modules():
        imported.setdefault(layer_of(path), set()).update(imported_layers(path))
    stale = {}
    for layers, imports in layer_table():
        made = set().union(*(imported.get(layer, set()) for layer in layers))
        if imports - made:
            stale[", ".join(layers)] = sorted(imports - made)
    assert stale == {}, "the layer table lists imports no module of the row makes"


def test_no_package_imports_another_packages_private_module_or_name() -> None:
    wrong = []
    for path in modules():
        own = layer_of(path)
        for parts, name in toolvisor_imports(path):
            if len(parts) < 2 or parts[1] == own:
                continue
            private = [p for p in parts[2:] if p.startswith("_")]
            if name is not None and name.startswith("_"):
                private.append(name)
            if private:
                wrong.append(f"{path.relative_to(PACKAGE)}: {'.'.join(parts)} {name or ''}")
    assert wrong == [], "import from the package's __init__, exporting what it needs there"


def test_a_subpackage_s_private_modules_are_its_own() -> None:
    """A private module (``toolvisor.host.calls._gates``) is imported only from inside the
    package that holds it (``toolvisor.host.calls``): its siblings' rooms use its face."""
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        importer = module_name(path)
        for parts, _name in toolvisor_imports(path):
            private = next((i for i, part in enumerate(parts) if part.startswith("_")), None)
            owner = ".".join(parts[:private]) if private is not None else None
            if owner is not None and importer != owner and not importer.startswith(f"{owner}."):
                wrong.append(f"{importer} imports {'.'.join(parts)}")
    assert wrong == [], "import from the package's __init__, exporting what it needs there"


def test_the_call_actors_know_nothing_of_runs() -> None:
    for path in (PACKAGE / "actors").rglob("*.py"):
        assert not imported_layers(path) & {"durable", "machine", "registry", "host"}, path


def test_the_layers_form_no_cycle() -> None:
    allowed = may_import()
    depth: dict[str, int] = {}

    def visit(layer: str, seen: tuple[str, ...]) -> int:
        assert layer not in seen, f"cycle: {' -> '.join((*seen, layer))}"
        if layer not in depth:
            depth[layer] = 1 + max((visit(d, (*seen, layer)) for d in allowed[layer]),
                                   default=0)
        return depth[layer]

    for layer in allowed:
        visit(layer, ())


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` (a package's ``__init__``: the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph() -> dict[str, set[str]]:
    """Each toolvisor module, and the toolvisor modules it imports anywhere in its text (at its
    top, under ``if TYPE_CHECKING:``, inside a function): ``from m import name`` imports the
    module ``m.name`` if there is one, else ``m``."""
    known = {module_name(p) for p in PACKAGE.rglob("*.py")}
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        imported = set()
        for parts, name in toolvisor_imports(path):
            module = ".".join(parts)
            imported.add(f"{module}.{name}" if f"{module}.{name}" in known else module)
        graph[module_name(path)] = imported & known - {module_name(path)}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of ``graph`` (``a -> b -> a``)."""
    cycles, done = [], set()
    for start in sorted(graph):
        if start in done:
            continue
        trail: list[str] = []
        on_trail: set[str] = set()

        def visit(module: str) -> list[str] | None:
            trail.append(module)
            on_trail.add(module)
            for imported in sorted(graph[module]):
                if imported in on_trail:
                    return [*trail[trail.index(imported):], imported]
                if imported not in done and (found := visit(imported)) is not None:
                    return found
            trail.pop()
            on_trail.discard(module)
            done.add(module)
            return None

        found = visit(start)
        if found is not None:
            cycles.append(found)
            done.update(found)
    return cycles


def test_the_cycle_finder_names_a_cycle_and_passes_a_tree() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_package_has_an_import_cycle_inside() -> None:
    graph = module_graph()
    cycles = []
    for package in sorted({p.parent for p in PACKAGE.rglob("__init__.py")}):
        inside = module_name(package / "__init__.py")
        within = {m: {i for i in imported if i == inside or i.startswith(f"{inside}.")}
                  for m, imported in graph.items()
                  if m == inside or m.startswith(f"{inside}.")}
        cycles += [" -> ".join(cycle) for cycle in import_cycles(within)
                   if " -> ".join(cycle) not in cycles]
    assert cycles == [], (
        "modules of one package import one another in a cycle (TYPE_CHECKING and function-level "
        "imports count): move what both need into a module below them, or give the lower one "
        "a small Protocol of what it calls:\n" + "\n".join(cycles))


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
