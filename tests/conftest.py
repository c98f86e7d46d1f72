"""Every test in this suite is checked for leaked threads, processes and files."""

from __future__ import annotations

import pytest

pytest_plugins: list[str] = []


@pytest.fixture(autouse=True)
def _no_leaks(toolvisor_no_leaks: object) -> None:
    """Apply the plugin's leak check to every test."""
