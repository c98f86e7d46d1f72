"""Lifecycle events: quiet by default, JSON or console when asked, captured in tests."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from tests.support import handlers as h
from toolvisor import (
    Agent,
    Completed,
    Limits,
    Tool,
    configure_logging,
    dropped_events,
    set_event_sink,
)
from toolvisor._logging import get_event_log
from toolvisor.testing import ScriptedModel, call, calls, capture_events


def test_events_are_quiet_by_default_and_captured_with_bound_fields() -> None:
    log = get_event_log("tool_call", tool_name="t").bind(tool_call_id="c1")
    log.info("call_started")
    with capture_events() as events:
        log.info("call_completed", duration=0.1)
        log.warning("call_abandoned")
    log.info("after")
    assert events == [
        {"event": "call_completed", "level": "info", "component": "tool_call",
         "tool_name": "t", "tool_call_id": "c1", "duration": 0.1},
        {"event": "call_abandoned", "level": "warning", "component": "tool_call",
         "tool_name": "t", "tool_call_id": "c1"},
    ]


def test_json_logging_prints_one_object_per_event_at_the_chosen_level() -> None:
    stream = io.StringIO()
    configure_logging("json", level="warning", stream=stream)
    try:
        log = get_event_log("supervisor", supervisor_id="root")
        log.info("child_started")
        log.error("restart_intensity_exceeded", restarts=4)
    finally:
        configure_logging(None)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    event = json.loads(lines[0])
    assert (event["event"], event["level"], event["supervisor_id"], event["restarts"]) == (
        "restart_intensity_exceeded", "error", "root", 4)


def test_console_logging_and_bad_settings() -> None:
    stream = io.StringIO()
    configure_logging("console", stream=stream)
    try:
        get_event_log("supervisor").info("child_started", child_id="a")
    finally:
        configure_logging(None)
    assert "child_started" in stream.getvalue() and "child_id=a" in stream.getvalue()
    with pytest.raises(ValueError, match="format must be"):
        configure_logging("xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="level must be"):
        configure_logging("json", level="loud")  # type: ignore[arg-type]


def test_an_event_the_sink_cannot_take_is_dropped_counted_and_said_once_per_sink(
        capsys: pytest.CaptureFixture[str]) -> None:
    def broken(level: str, event: str, fields: dict[str, Any]) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    log = get_event_log("supervisor")
    before = dropped_events()
    previous = set_event_sink(broken)
    try:
        for _ in range(3):
            log.info("child_started")  # never raises where it is emitted
        assert dropped_events() == before + 3
        assert capsys.readouterr().err.count("toolvisor: the log sink failed") == 1
        set_event_sink(broken)  # a sink installed anew is told about once more
        log.warning("child_abandoned")
    finally:
        set_event_sink(previous)
    err = capsys.readouterr().err
    assert dropped_events() == before + 4
    assert err.count("toolvisor: the log sink failed") == 1
    assert "'child_abandoned' (BrokenPipeError: [Errno 32] Broken pipe)" in err
    assert "toolvisor.dropped_events()" in err


def test_a_sink_that_raises_costs_its_events_never_an_agent_or_a_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    """From its second event on the sink raises, as a console sink does once the reader of its
    pipe went away: agents start, runs on every isolation complete, the tree stops."""
    seen: list[str] = []

    def breaks_after_one(level: str, event: str, fields: dict[str, Any]) -> None:
        seen.append(event)
        if len(seen) > 1:
            raise BrokenPipeError(32, "Broken pipe")

    tools = [Tool(name="echo", handler=h.ok_echo), Tool(name="hello", handler=h.async_ok),
             Tool(name="pid", handler=h.pid, isolation="process")]
    batch = calls(call("echo", {"a": 1}), call("hello", {}), call("pid", {}))
    before = dropped_events()
    previous = set_event_sink(breaks_after_one)
    try:
        with Agent(ScriptedModel({"go": [batch, "first"], "again": [batch, "second"]}), tools,
                   limits=Limits(process_workers=1)) as agent:
            outcomes = [agent.run("go"), agent.run("again")]
    finally:
        set_event_sink(previous)
    assert [o.text for o in outcomes if isinstance(o, Completed)] == ["first", "second"]
    assert 0 < dropped_events() - before <= len(seen) - 1  # a late event may still be on its way
    assert capsys.readouterr().err.count("toolvisor: the log sink failed") == 1
