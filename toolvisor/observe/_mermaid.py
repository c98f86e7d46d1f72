"""A run's outcome as a Mermaid timeline: one section per turn, the model's answer and each
call's result in order. It reads only the outcome's transcript, so it needs nothing running
(an attempt a retry replaced is not in the transcript: only each call's last result is)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from toolvisor.contract import AssistantMessage, ToolResultMessage

_WIDTH = 60


def _text(value: str) -> str:
    """One line Mermaid reads as plain text (``:`` and ``#`` are its syntax)."""
    flat = re.sub(r"\s+", " ", value).replace(":", " -").replace("#", "").replace(";", ",")
    return flat if len(flat) <= _WIDTH else flat[:_WIDTH - 1] + "…"


def _result(message: ToolResultMessage) -> str:
    if not message.is_error:
        return f"✓ {_text(message.content)}"
    try:
        error = json.loads(message.content)["error"]
    except (ValueError, KeyError, TypeError):
        return f"✗ {_text(message.content)}"
    reason = error.get("reason", error) if isinstance(error, dict) else error
    return f"✗ {_text(str(reason))}"


def mermaid_timeline(outcome: Any) -> str:
    """The Mermaid ``timeline`` of a run's outcome (``Completed``, ``Suspended``, ...)."""
    kind = getattr(outcome, "kind", type(outcome).__name__.lower())
    lines = ["timeline", f"    title Run {_text(str(kind))} after {outcome.turns} turn(s)"]
    turn = 0
    for message in outcome.messages:
        if isinstance(message, AssistantMessage):
            turn += 1
            lines.append(f"    section Turn {turn}")
            names = ", ".join(c.name for c in message.tool_calls)
            said = f"calls {names}" if names else f"answers {message.content or ''}"
            lines.append(f"        model : {_text(said)}")
        elif isinstance(message, ToolResultMessage):
            lines.append(f"        {message.name} {_text(message.tool_call_id)} : "
                         f"{_result(message)}")
    for question in getattr(outcome, "questions", ()):
        lines.append(f"        waiting : {_text(question.question)}")
    return "\n".join(lines) + "\n"


def write_mermaid(outcome: Any, path: str | Path) -> Path:
    """Write the timeline to ``path``: a ``.md`` file gets a fenced ``mermaid`` block (how
    GitHub shows it), any other the bare diagram (``.mmd``). Returns the path."""
    target = Path(path)
    diagram = mermaid_timeline(outcome)
    if target.suffix == ".md":
        diagram = f"```mermaid\n{diagram}```\n"
    target.write_text(diagram, encoding="utf-8")
    return target
