"""What users import in their own tests: leak checks, scripted models, policy harness."""

from toolvisor.testing._leaks import LeakCheck

__all__ = ["LeakCheck"]
