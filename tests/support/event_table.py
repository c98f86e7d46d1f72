"""The events table of docs/observability.md, read as a test compares a run's events with
it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def documented_events() -> dict[str, dict[str, Any]]:
    """The rows of the events table: components, levels, fields, and whether the run emits it."""
    text = DOC.read_text()
    table = text.split("<!-- events-table -->")[1].split("<!-- /events-table -->")[0]
    rows: dict[str, dict[str, Any]] = {}
    for line in table.strip().splitlines()[2:]:
        event, components, levels, fields, seen = (c.strip() for c in line.strip("|").split("|"))
        rows[event.strip("`")] = {
            "components": set(re.findall(r"`(\w+)`", components)),
            "levels": {level.strip() for level in levels.split(",")},
            "fields": set(re.findall(r"`(\w+)`", fields)),
            "open": "..." in fields or "data" in fields,
            "seen": seen == "yes",
        }
    return rows
