"""What a background process runs: a function or ``Tool``, and the name it is found by.

A process's function is named by ``module:qualname`` where it has such a name: a worker
imports it by that name, and a host that took over after a crash runs it again by it (the name
is what the store keeps). A function with none (a closure) runs in the agent's own process
(``thread``, ``asyncio``) and is never run again after a crash. A worker's ``__main__`` is
``__mp_main__``: its functions are named as the agent's ``__main__``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolvisor.contract import Tool

_NAME = re.compile(r"[^A-Za-z0-9_-]")


def tool_of(fn: Callable[..., Any] | str, *, isolation: str | None, timeout: float | None,
            retryable: bool, options: Mapping[str, Any] | None) -> tuple[str | None, Tool]:
    """``fn``'s name (``module:qualname``; ``None`` for a callable found by none, such as a
    closure) and the ``Tool`` that runs it."""
    if isinstance(fn, str):
        ref: str | None = fn
        found = _resolve(fn)
    elif isinstance(fn, Tool) or callable(fn):
        ref, found = name_of(fn), fn
    else:
        raise TypeError(f"a process runs a function or a Tool, got {fn!r}")
    if isinstance(found, Tool):
        if isolation is not None or timeout is not None or options is not None or retryable:
            raise ValueError(f"process function {found.name} is a Tool, which brings its own "
                             "isolation, timeout, options and retryable: give none of them")
        return ref, found
    named = ref or str(getattr(found, "__name__", ""))
    name = _NAME.sub("_", named.rpartition(".")[2].rpartition(":")[2])[:64] or "process"
    return ref, Tool(name=name, handler=found, isolation=isolation, timeout=timeout,
                     retryable=retryable, options=options)


def name_of(fn: Callable[..., Any]) -> str | None:
    """Where ``fn`` is found by name (the handler of a ``Tool`` names the ``Tool``), or
    ``None`` if it is found by none (a closure, a lambda, a function of a module that cannot
    be imported)."""
    named = fn.handler if isinstance(fn, Tool) else fn
    module = getattr(named, "__module__", None)
    qualname = getattr(named, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    ref = f"{'__main__' if module == '__mp_main__' else module}:{qualname}"
    try:
        return ref if _resolve(ref) is fn else None
    except (ValueError, TypeError):
        return None


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
