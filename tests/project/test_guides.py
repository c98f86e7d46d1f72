"""Every package has its guide beside it, and ``docs/architecture.md`` stays a map one can read.

Each package directory under ``toolvisor/`` (its private subpackages too) has a ``README.md``
that is not empty: what the package owns, its public face, who owns its state, what it may
import. The architecture page stays at most 300 lines and gives every top-level package a
paragraph in its "Rooms" section; the per-module prose is in the module docstrings.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "toolvisor"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 300


def packages() -> list[Path]:
    """Every package directory under ``toolvisor/``, the root itself left out (its guide is the
    project's README)."""
    return sorted(init.parent for init in PACKAGE.rglob("__init__.py") if init.parent != PACKAGE)


def test_every_package_has_a_guide_that_is_not_empty() -> None:
    found = packages()
    assert PACKAGE / "isolation" / "_process" in found  # private subpackages are covered too
    missing = [str(p.relative_to(ROOT)) for p in found
               if not (p / "README.md").is_file() or not (p / "README.md").read_text().strip()]
    assert missing == [], "write a README.md beside each package (see docs/architecture.md)"


def test_the_architecture_page_is_at_most_300_lines() -> None:
    lines = len(ARCHITECTURE.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"docs/architecture.md has {lines} lines: it is the map; put per-module prose in the "
        "module's docstring and per-package guidance in the package's README.md")


def test_the_rooms_section_has_a_paragraph_per_top_level_package() -> None:
    rooms = ARCHITECTURE.read_text().split("\n## Rooms\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\*\*`([a-z_]+)`\*\*", rooms, flags=re.MULTILINE))
    top = {p.name for p in packages() if p.parent == PACKAGE}
    assert top - named == set(), "give each package a paragraph in architecture.md's Rooms"
