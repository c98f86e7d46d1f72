"""What users import in their own tests: scripted models, policy harness, leak checks, events."""

from toolvisor.testing._drive import DriveResult, DriveScriptError, drive
from toolvisor.testing._events import capture_events
from toolvisor.testing._leaks import LeakCheck
from toolvisor.testing._models import (
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    ScriptNotFinishedError,
    call,
    calls,
)
from toolvisor.testing._policy import decide, decide_model

__all__ = [
    "DriveResult",
    "DriveScriptError",
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
]
