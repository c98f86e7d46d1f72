"""Reading a function's docstring into what the model is told: a description and one per
parameter, in the Google, NumPy and Sphinx styles (parsed by ``docstring_parser``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import docstring_parser


@dataclass(frozen=True, slots=True)
class Documented:
    """A docstring's prose (before its first section) and its parameters' descriptions."""

    description: str = ""
    parameters: Mapping[str, str] = field(default_factory=dict)


def read_docstring(fn: Callable[..., Any]) -> Documented:
    """What ``fn``'s docstring says of it and of each parameter; the style is detected.

    A docstring the parser cannot read is taken whole as the description, with no parameter
    descriptions: documentation is prose, never a reason to refuse a tool.
    """
    text = inspect.getdoc(fn)
    if not text:
        return Documented()
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:
        return Documented(text)
    gap = "\n\n" if parsed.blank_after_short_description else "\n"
    prose = gap.join(part for part in (parsed.short_description, parsed.long_description) if part)
    return Documented(prose, {p.arg_name: p.description for p in parsed.params if p.description})
