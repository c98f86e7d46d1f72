"""What users import in their own tests: scripted models, policy harness, leak checks, events,
a fake clock and a breaker harness; and one tool call inline (``execute``, ``encode``: what
the agent would make of it, with no agent)."""

from toolvisor.call import aexecute, encode, encode_checked, execute
from toolvisor.machine import MachineConfig
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
    "MachineConfig",
    "ScriptExhaustedError",
    "ScriptNotFinishedError",
    "ScriptedModel",
    "aexecute",
    "call",
    "calls",
    "capture_events",
    "decide",
    "decide_model",
    "drive",
    "drive_breaker",
    "encode",
    "encode_checked",
    "execute",
    "tolerate_fds",
]
