"""Every Python example in the README runs as written (see ``tests/_doc_blocks.py``), and the
picture it shows is committed."""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import pytest

from tests._doc_blocks import README, blocks, kinds, run_block
from tests._provider_server import ProviderServer

pytest_plugins = ["pytester"]

BLOCKS = blocks(README, "python")
KINDS = kinds(BLOCKS)


def cases(kind: str) -> list[Any]:
    return [pytest.param(BLOCKS[i], id=f"block{i}") for i in KINDS[kind]]


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 5


def test_the_readme_has_no_fragment_left_unrun() -> None:
    """Every code block of the README is a whole program, run below."""
    assert blocks(README, "py") == []


@pytest.mark.parametrize("source", cases("plain"))
def test_readme_example_runs(source: str, provider: ProviderServer,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_block(source, README, provider, monkeypatch)


@pytest.mark.parametrize("source", cases("ray"))
def test_readme_ray_example_runs(source: str, provider: ProviderServer,
                                 monkeypatch: pytest.MonkeyPatch,
                                 ray_cluster: ModuleType) -> None:
    """On the session's cluster, not one of the example's own."""
    run_block(source, README, provider, monkeypatch)


@pytest.mark.parametrize("source", cases("pytest"))
def test_readme_test_module_passes(source: str, provider: ProviderServer,
                                   monkeypatch: pytest.MonkeyPatch, pytester: Any) -> None:
    run_block(source, README, provider, monkeypatch, pytester)


def test_the_readme_s_images_are_committed() -> None:
    """The live view's picture (``python -m examples.demo --svg docs/live-view.svg``)."""
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text())
    assert "docs/live-view.svg" in images
    for image in images:
        drawn = (README.parent / image).read_text()
        assert drawn.startswith("<svg"), image
    live_view = (README.parent / "docs/live-view.svg").read_text().replace("&#160;", " ")
    assert all(shown in live_view for shown in ("restarts:", "run ", "book", "completed"))
