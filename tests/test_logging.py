"""Lifecycle events: quiet by default, JSON or console when asked, captured in tests."""

from __future__ import annotations

import io
import json

import pytest

from toolvisor import configure_logging
from toolvisor._logging import get_event_log
from toolvisor.testing import capture_events


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
