"""The pytest plugin users get with the package: agent fixture and leak check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolvisor import Agent, Completed, Ok, Tool
from toolvisor.testing import ScriptedModel, call, calls

pytest_plugins = ["pytester"]


def test_the_agent_fixture_builds_a_working_agent(toolvisor_agent: Callable[..., Agent]) -> None:
    agent = toolvisor_agent(ScriptedModel([calls(call("t")), "done"]),
                            [Tool(name="t", handler=lambda a: Ok(1))])
    assert isinstance(agent.run("go"), Completed)


def test_the_leak_check_fails_a_test_that_leaves_a_thread(pytester: Any) -> None:
    pytester.makepyfile("""
        import threading
        stop = threading.Event()

        def test_leaky(toolvisor_no_leaks):
            threading.Thread(target=stop.wait, name="forgotten").start()
            toolvisor_no_leaks.settle = 0.01

        def test_clean_up():
            stop.set()
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the test left behind:*", "*thread 'forgotten'*"])


@pytest.mark.parametrize("closed", [True, False])
def test_the_agent_fixture_closes_what_the_test_did_not(
        toolvisor_agent: Callable[..., Agent], closed: bool) -> None:
    agent = toolvisor_agent(ScriptedModel([]))
    if closed:
        agent.close()
