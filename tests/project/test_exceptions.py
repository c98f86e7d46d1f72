"""Every exception class toolvisor defines derives from ``ToolvisorError`` and is in the table of
docs/architecture.md, "Exceptions"."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import toolvisor
from toolvisor import RunNotCompletedError, ToolvisorError
from toolvisor.machine import ResponseRefused
from toolvisor.supervisors import TooManyChildrenError

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def defined_exceptions() -> dict[str, type[BaseException]]:
    """``layer.Name`` -> class, for every exception class defined in a toolvisor module."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(toolvisor.__path__, "toolvisor."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) \
                    and cls.__module__ == module.__name__:
                found[f"{info.name.split('.')[1]}.{cls.__name__}"] = cls
    return found


def documented() -> set[str]:
    section = ARCHITECTURE.read_text().split("## Exceptions", 1)[1]
    return set(re.findall(r"^\| `([a-z_]+\.\w+)` \|", section, flags=re.MULTILINE))


def test_every_exception_derives_from_the_common_base() -> None:
    exceptions = defined_exceptions()
    assert len(exceptions) > 20
    assert [n for n, cls in exceptions.items() if not issubclass(cls, ToolvisorError)] == []


def test_the_table_lists_every_exception_and_nothing_else() -> None:
    assert documented() == set(defined_exceptions()) - {"contract.ToolvisorError"}


def test_the_base_keeps_the_builtin_category() -> None:
    assert issubclass(ResponseRefused, ValueError)
    assert issubclass(TooManyChildrenError, RuntimeError)
    assert issubclass(RunNotCompletedError, RuntimeError)
