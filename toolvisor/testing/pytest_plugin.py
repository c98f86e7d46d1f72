"""toolvisor's pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:

* ``toolvisor_no_leaks``: fails the test if it leaves a thread, child process or open file
  descriptor behind. Make it autouse in your ``conftest.py`` to check every test.
* ``toolvisor_agent``: a factory, ``toolvisor_agent(model, tools, **settings) -> Agent``; every
  agent it made is closed after the test, and then nothing may be left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolvisor.agent import Agent
from toolvisor.testing._leaks import LeakCheck


@pytest.fixture
def toolvisor_no_leaks() -> Iterator[LeakCheck]:
    """Snapshot before the test; after it, fail if anything started is still alive."""
    check = LeakCheck()
    yield check
    leaks = check.leaks()
    if leaks:
        pytest.fail("the test left behind:\n  " + "\n  ".join(leaks), pytrace=False)


@pytest.fixture
def toolvisor_agent(toolvisor_no_leaks: LeakCheck) -> Iterator[Callable[..., Agent]]:
    """Build agents with ``Agent``'s own arguments; closes them all, then checks for leaks."""
    agents: list[Agent] = []

    def make(*args: Any, **kwargs: Any) -> Agent:
        agent = Agent(*args, **kwargs)
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.close()
