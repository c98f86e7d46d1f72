"""A model that takes the connection and never answers is visible: the user is told, with no
logging set up, that the run waits on it and that its call is retried; ``first_byte_timeout``
ends such an attempt long before ``Timeouts.model``."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.provider_server import ProviderServer, Reply
from toolvisor import Agent, Failed, ModelRetryPolicy, Timeouts
from toolvisor.models import OpenAIChatModel
from toolvisor.testing import capture_events

TWO_ATTEMPTS = ModelRetryPolicy(max_attempts=2, base_delay=0.01, jitter=0.0)


@pytest.fixture
def silent(provider: ProviderServer) -> Iterator[ProviderServer]:
    """The provider server, taking two requests and answering neither until the test ends."""
    hold = threading.Event()
    provider.script(Reply(body={}, hold=hold), Reply(body={}, hold=hold))
    yield provider
    hold.set()


def test_a_silent_model_is_told_on_stderr_with_no_logging_set_up(silent: ProviderServer) -> None:
    program = textwrap.dedent(f"""
        from toolvisor import Agent, Timeouts
        from toolvisor.models import OpenAIChatModel

        model = OpenAIChatModel("m", base_url={silent.url + "/v1"!r}, api_key="k")
        with Agent(model, timeouts=Timeouts(model=0.5, model_warn_after=0.1),
                   on_model_error="fail") as agent:
            print(agent.run("hello").status)
    """)
    done = subprocess.run([sys.executable, "-c", program], check=False, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "failed", done.stderr
    told = [line for line in done.stderr.splitlines() if line.startswith("toolvisor: run ")]
    assert [line.split(": ", 2)[2] for line in told] == [
        "the model has not answered for 0.1 s (turn 1, attempt 1); the attempt ends at "
        "Timeouts.model=0.5 s",
        "the model call failed (turn 1, attempt 1): the model did not answer within 0.5 s; "
        "the run fails"], done.stderr


def test_first_byte_timeout_ends_a_silent_attempt_before_model_timeout(
        silent: ProviderServer, caplog: pytest.LogCaptureFixture) -> None:
    model = OpenAIChatModel("m", base_url=silent.url + "/v1", api_key="k",
                            first_byte_timeout=0.2)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="toolvisor"), \
            Agent(model, timeouts=Timeouts(model=30), on_model_error=TWO_ATTEMPTS) as agent:
        outcome = agent.run("hello")
    assert time.monotonic() - started < 10  # two attempts of 0.2 s, not of 30 s
    assert isinstance(outcome, Failed) and outcome.model_error is not None
    assert outcome.model_error.reason == "timeout"
    assert "first_byte_timeout=0.2 s" in outcome.model_error.message
    assert len(silent.requests) == 2
    told = [r.getMessage() for r in caplog.records if r.name == "toolvisor"]
    assert [t.rsplit("; ", 1)[1] for t in told] == ["retrying", "the run fails"], told
    assert all("(or could not be reached in time): Request timed out;" in t for t in told)


def test_with_a_sink_installed_the_notices_go_there_only(
        silent: ProviderServer, caplog: pytest.LogCaptureFixture) -> None:
    model = OpenAIChatModel("m", base_url=silent.url + "/v1", api_key="k")
    with caplog.at_level(logging.WARNING, logger="toolvisor"), capture_events() as events, \
            Agent(model, timeouts=Timeouts(model=0.5, model_warn_after=0.05),
                  on_model_error=TWO_ATTEMPTS) as agent:
        assert agent.run("hello").status == "failed"
    assert [r for r in caplog.records if r.name == "toolvisor"] == []
    told = [(e["event"], e["level"], e["attempt"]) for e in events
            if e["event"] in ("model_call_waiting", "model_call_failed")]
    assert told == [("model_call_waiting", "warning", 1), ("model_call_failed", "warning", 1),
                    ("model_call_waiting", "warning", 2), ("model_call_failed", "warning", 2)]


@pytest.mark.parametrize("after", [0, "soon"])
def test_model_warn_after_must_be_seconds(after: object) -> None:
    with pytest.raises(ValueError, match=r"Timeouts\.model_warn_after must be a positive, finite "
                                         "number of seconds or None"):
        Timeouts(model_warn_after=after)  # type: ignore[arg-type]


def test_first_byte_timeout_must_be_seconds() -> None:
    with pytest.raises(ValueError, match="first_byte_timeout"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9", api_key="k", first_byte_timeout=-1)
