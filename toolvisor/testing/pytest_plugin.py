"""toolvisor's pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:

* ``toolvisor_no_leaks``: fails the test if it leaves a thread, child process or open file
  descriptor behind. Make it autouse in your ``conftest.py`` to check every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolvisor.testing._leaks import LeakCheck


@pytest.fixture
def toolvisor_no_leaks() -> Iterator[LeakCheck]:
    """Snapshot before the test; after it, fail if anything started is still alive."""
    check = LeakCheck()
    yield check
    leaks = check.leaks()
    if leaks:
        pytest.fail("the test left behind:\n  " + "\n  ".join(leaks), pytrace=False)
