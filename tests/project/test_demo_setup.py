"""``make demo`` sets up a small environment of its own (the core and the extras its recipe
names), so the demo must run with nothing else: run it where every other installed
distribution is refused, as it would be missing there."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
_PROBE = """
import importlib.metadata, json, re, sys
from pathlib import Path

allowed = set(json.loads(sys.argv[2]))
owners = importlib.metadata.packages_distributions()
refused = set()


class OnlyTheDemoEnvironment:
    \"\"\"Import as the demo's environment would: a distribution it lacks is not there.\"\"\"

    def find_spec(self, name, path=None, target=None):
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(name.split(".")[0], [])}
        if path is None and dists and not dists & allowed:
            refused.add(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, OnlyTheDemoEnvironment())
from examples import demo

demo.main(timeline=Path(sys.argv[1]))
try:
    import opentelemetry  # installed here, not there: shows the guard refuses it
except ModuleNotFoundError:
    pass
print(json.dumps(sorted(refused)))
"""


def demo_extras() -> list[str]:
    """The extras the Makefile's demo environment installs: ``pip install ... '.[a,b]'``."""
    recipe = re.search(r"^\$\(DEMO_STAMP\):.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(),
                       flags=re.MULTILINE)
    assert recipe is not None, "the Makefile has no $(DEMO_STAMP) recipe"
    (extras,) = re.findall(r"pip install .*'\.\[([\w,-]+)\]'", recipe[1])
    return extras.split(",")


def installed_by(extras: list[str]) -> set[str]:
    """toolvisor and the distributions its core and ``extras`` bring in, transitively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
    found = {"toolvisor"}
    while wanted:
        requirement = wanted.pop()
        name = _canonical(requirement.name)
        if name in found:
            continue
        found.add(name)
        for text in importlib.metadata.requires(requirement.name) or []:
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                wanted.append(needed)
    return found


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_demo_runs_with_only_what_its_environment_installs(tmp_path: Path) -> None:
    allowed = installed_by(demo_extras())
    assert {"toolvisor", "rich", "pydantic", "pykka"} <= allowed
    assert "opentelemetry-api" not in allowed
    shown = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "run.md"), json.dumps(sorted(allowed))],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr  # the demo ran to its end without the rest
    assert "final answer" in shown.stdout
    refused = json.loads(shown.stdout.splitlines()[-1])
    assert "opentelemetry" in refused  # what it refused (optional imports, the check's own)
