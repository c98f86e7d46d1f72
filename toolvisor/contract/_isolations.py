"""What ``Tool`` knows of isolations: the rules each registered one gives, by name, and nothing
of the backends themselves (they register their rules when they are registered)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class IsolationRules:
    """What a ``Tool`` built for one isolation must keep.

    ``coroutines``: whether it runs ``async def`` handlers (else plain ones); ``default``:
    picked for a handler of its kind when the tool names no isolation (one per kind);
    ``check(tool)``: raises if the ``Tool`` cannot run there (its handler, its ``options``),
    called once the tool is otherwise valid (typed ``Any``: ``Tool`` is built on these rules,
    so this module cannot name it without an import cycle).
    """

    coroutines: bool
    default: bool
    check: Callable[[Any], None]


_rules: dict[str, IsolationRules] = {}  # written when a backend registers, at import time


def register_isolation(name: str, rules: IsolationRules) -> None:
    """Let tools name ``name`` as their isolation, built under ``rules``."""
    if name in _rules:
        raise ValueError(f"isolation {name!r} is already registered")
    if rules.default and any(r.default and r.coroutines == rules.coroutines
                             for r in _rules.values()):
        raise ValueError(f"isolation {name!r}: another isolation is already the default for "
                         f"{'async def' if rules.coroutines else 'plain'} handlers")
    _rules[name] = rules


def _names(coroutines: bool | None = None) -> str:
    names = [repr(n) for n, r in _rules.items() if coroutines in (None, r.coroutines)]
    if len(names) < 2:
        return "".join(names) or "none registered"
    return f"{', '.join(names[:-1])} or {names[-1]}"


def isolation_rules(name: str, tool_name: str) -> IsolationRules:
    """The rules of ``name``; ``ValueError`` naming the registered isolations."""
    rules = _rules.get(name) if isinstance(name, str) else None
    if rules is None:
        raise ValueError(f"tool {tool_name!r}: isolation must be {_names()} (or one registered "
                         f"with toolvisor.isolation.register_backend), got {name!r}")
    return rules


def default_isolation(coroutines: bool, tool_name: str) -> str:
    """The isolation a handler of this kind gets when its tool names none."""
    for name, rules in _rules.items():
        if rules.default and rules.coroutines == coroutines:
            return name
    raise ValueError(f"tool {tool_name!r}: no isolation is registered as the default for "
                     f"{'async def' if coroutines else 'plain'} handlers; name one")


def check_kind(name: str, rules: IsolationRules, coroutines: bool, tool_name: str) -> None:
    """``ValueError`` if ``name`` runs the other kind of handler than this one."""
    if coroutines and not rules.coroutines:
        raise ValueError(f"tool {tool_name!r}: an async def handler needs isolation="
                         f"{_names(True)}, got {name!r}")
    if rules.coroutines and not coroutines:
        raise ValueError(f"tool {tool_name!r}: isolation={name!r} needs an async def handler; "
                         f"use {_names(False)} for a sync one")
