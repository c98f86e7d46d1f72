"""``make demo`` as a reader runs it: it writes nothing unless asked, and stops quietly when
its reader does (``| head -3``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOUND = 120  # a safety bound on a run that must end by itself, not a timing


def test_the_demo_writes_only_what_it_is_asked_to(tmp_path: Path) -> None:
    tracked = (ROOT / "docs" / "demo-run.md").read_bytes()
    done = subprocess.run([sys.executable, "-m", "examples.demo"], cwd=ROOT,
                          capture_output=True, text=True, timeout=BOUND, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "all 5 call actors replied once and exited normally" in done.stdout
    assert "Mermaid" not in done.stdout
    assert (ROOT / "docs" / "demo-run.md").read_bytes() == tracked
    timeline = tmp_path / "run.md"
    done = subprocess.run([sys.executable, "-m", "examples.demo", "--timeline", str(timeline)],
                          cwd=ROOT, capture_output=True, text=True, timeout=BOUND, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert timeline.read_text().startswith("```mermaid\ntimeline\n")


def test_the_demo_piped_into_head_stops_quietly() -> None:
    done = subprocess.run(["bash", "-o", "pipefail", "-c",
                           f"{sys.executable} -m examples.demo | head -3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=BOUND, check=False)
    assert len(done.stdout.splitlines()) == 3
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, \
        done.stderr[-2000:]
    assert done.returncode in (0, 141)
