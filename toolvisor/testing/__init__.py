"""What users import in their own tests: leak checks, event capture, scripted models."""

from toolvisor.testing._events import capture_events
from toolvisor.testing._leaks import LeakCheck

__all__ = ["LeakCheck", "capture_events"]
