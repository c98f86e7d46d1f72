"""What users import in their own tests: leak checks, event capture, scripted models."""

from toolvisor.testing._events import capture_events
from toolvisor.testing._leaks import LeakCheck
from toolvisor.testing._models import FunctionModel, ScriptedModel, call, calls

__all__ = [
    "FunctionModel",
    "LeakCheck",
    "ScriptedModel",
    "call",
    "calls",
    "capture_events",
]
