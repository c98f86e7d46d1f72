"""Which competitor frameworks exist, which distributions each needs, and loading their drivers.

A driver module imports its framework at import time, so it is imported only once every
distribution it needs is installed; a missing one is reported, never raised.
"""

import importlib
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from bench.competitors._driver import Driver


@dataclass(frozen=True)
class Framework:
    """One competitor: its short name, its driver module and the distributions it needs."""

    name: str
    module: str
    distributions: tuple[str, ...]

    def versions(self) -> dict[str, str | None]:
        """Installed version of each needed distribution; None for a missing one."""
        found: dict[str, str | None] = {}
        for distribution in self.distributions:
            try:
                found[distribution] = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                found[distribution] = None
        return found

    def missing(self) -> list[str]:
        return [name for name, version in self.versions().items() if version is None]

    def drivers(self) -> Sequence[Driver]:
        """The module's drivers; import it only when ``missing()`` is empty."""
        return cast(Sequence[Driver], importlib.import_module(self.module).DRIVERS)

    def driver(self, name: str) -> Driver:
        for driver in self.drivers():
            if driver.name == name:
                return driver
        known = [driver.name for driver in self.drivers()]
        raise ValueError(f"{self.name} has no driver named {name!r}; known: {known}")


FRAMEWORKS = (
    Framework("pydantic-ai", "bench.competitors._pydantic_ai", ("pydantic-ai-slim",)),
    Framework("openai-agents", "bench.competitors._openai_agents", ("openai-agents",)),
    Framework("langgraph", "bench.competitors._langgraph", ("langgraph", "langchain-core")),
    Framework("pydantic-ai+toolvisor", "bench.competitors._pydantic_ai_toolvisor",
              ("pydantic-ai-slim",)),
    Framework("openai-agents+toolvisor", "bench.competitors._openai_agents_toolvisor",
              ("openai-agents",)),
    Framework("langgraph+toolvisor", "bench.competitors._langgraph_toolvisor",
              ("langgraph", "langchain-core")),
)


def framework_named(name: str) -> Framework:
    for framework in FRAMEWORKS:
        if framework.name == name:
            return framework
    known = [framework.name for framework in FRAMEWORKS]
    raise ValueError(f"unknown competitor framework {name!r}; choose from {known}")
