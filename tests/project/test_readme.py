"""Every Python example in the README runs as written (see ``tests/support/doc_blocks.py``), and the
picture it shows is committed."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.support.doc_blocks import GUIDES, README, blocks, kinds, run_block
from tests.support.provider_server import ProviderServer

BLOCKS = blocks(README, "python")
KINDS = kinds(BLOCKS)


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 5


def test_every_readme_block_runs_below() -> None:
    """Every code block of the README is a whole program that needs neither a Ray cluster nor
    pytest (the guides' tests have runners for those)."""
    assert blocks(README, "py") == []
    assert KINDS["ray"] == [] and KINDS["pytest"] == []


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(source: str, provider: ProviderServer,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_block(source, README, provider, monkeypatch)


def test_the_readme_s_images_are_committed() -> None:
    """The live view's picture (``python -m examples.demo --svg docs/live-view.svg``)."""
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text())
    assert "docs/live-view.svg" in images
    for image in images:
        drawn = (README.parent / image).read_text()
        assert drawn.startswith("<svg"), image
    live_view = (README.parent / "docs/live-view.svg").read_text().replace("&#160;", " ")
    assert all(shown in live_view for shown in ("restarts:", "run ", "book", "completed"))


def _extras() -> set[str]:
    """The extras pyproject.toml defines."""
    with (README.parent / "pyproject.toml").open("rb") as file:
        return set(tomllib.load(file)["project"]["optional-dependencies"])


def test_every_install_line_works_from_a_clone() -> None:
    """toolvisor is not on the package index: each ``pip install`` of toolvisor in the README
    and the guides installs the clone (``.``, ``'.[extra,...]'``) with extras that exist."""
    extras = _extras()
    for page in [README, *GUIDES]:
        text = page.read_text()
        assert not re.search(r"pip install '?toolvisor\b", text), page.name
        for named in re.findall(r"pip install '\.\[([^\]]+)\]'", text):
            assert set(named.split(",")) <= extras, (page.name, named)


def test_the_readme_names_every_extra_the_command_and_how_long_make_test_takes() -> None:
    text = " ".join(README.read_text().split())
    listed = text[text.index("The extras are "):text.index("Combine them")]
    assert {extra for extra in _extras() if f"`{extra}`" not in listed} == set()
    assert re.search(r"`make test` takes about [0-9.]+ minutes from a fresh clone", text)
    assert "`toolvisor runs`" in text and "`python -m toolvisor.cli` is the same" in text
