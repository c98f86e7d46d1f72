"""What users import in their own tests: scripted models, policy harness, leak checks, events,
a fake clock and a breaker harness."""

from toolvisor.testing._drive import DriveResult, DriveScriptError, drive
from toolvisor.testing._events import capture_events
from toolvisor.testing._leaks import LeakCheck, tolerate_fds
from toolvisor.testing._models import (
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    ScriptNotFinishedError,
    call,
    calls,
)
from toolvisor.testing._policy import decide, decide_model
from toolvisor.testing._resilience import BreakerStep, FakeClock, drive_breaker

__all__ = [
    "BreakerStep",
    "DriveResult",
    "DriveScriptError",
    "FakeClock",
    "FunctionModel",
    "LeakCheck",
    "ScriptExhaustedError",
    "ScriptNotFinishedError",
    "ScriptedModel",
    "call",
    "calls",
    "capture_events",
    "decide",
    "decide_model",
    "drive",
    "drive_breaker",
    "tolerate_fds",
]
