"""What a background process runs: a module-level function or ``Tool``, found by name.

A process's function is named by ``module:qualname`` so that it runs in any isolation (a
worker imports it) and again after a restart (the name is what the store keeps). A worker's
``__main__`` is ``__mp_main__``: its functions are named as the agent's ``__main__``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolvisor.contract import Tool

_NAME = re.compile(r"[^A-Za-z0-9_-]")


def tool_of(fn: Callable[..., Any] | str, *, isolation: str | None, timeout: float | None,
             retryable: bool, options: Mapping[str, Any] | None) -> tuple[str, Tool]:
    """``fn``'s reference (``module:qualname``) and the ``Tool`` that runs it."""
    ref = fn if isinstance(fn, str) else _reference(fn)
    found = _resolve(ref)
    if isinstance(found, Tool):
        if isolation is not None or timeout is not None or options is not None or retryable:
            raise ValueError(f"process function {ref} is a Tool, which brings its own "
                             "isolation, timeout, options and retryable: give none of them")
        return ref, found
    name = _NAME.sub("_", ref.rpartition(".")[2].rpartition(":")[2])[:64] or "process"
    return ref, Tool(name=name, handler=found, isolation=isolation, timeout=timeout,
                     retryable=retryable, options=options)


def _reference(fn: Callable[..., Any]) -> str:
    """Where ``fn`` is found by name; the handler of a ``Tool`` names the ``Tool``."""
    named = fn.handler if isinstance(fn, Tool) else fn
    module = getattr(named, "__module__", None)
    qualname = getattr(named, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise TypeError(_NOT_FOUND.format(fn=fn))
    ref = f"{'__main__' if module == '__mp_main__' else module}:{qualname}"
    if _resolve(ref) is not fn:
        raise TypeError(_NOT_FOUND.format(fn=fn))
    return ref


_NOT_FOUND = ("a process runs a module-level function or Tool, found by its module and name "
              "(to run it in any isolation, and again after a restart), got {fn!r}; define it "
              "at the top level of a module")


def _resolve(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    if not module_name or not qualname:
        raise ValueError(f"a process function given by name is 'module:qualname', got {ref!r}")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"process function {ref} cannot be found: {exc}") from exc
    if not callable(found) and not isinstance(found, Tool):
        raise TypeError(f"process function {ref} is not callable: {found!r}")
    return found
