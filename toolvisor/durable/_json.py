"""Strict JSON for everything the store persists: no NaN, no pickles, one canonical form."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any, what: str) -> str:
    """``value`` as canonical JSON text (sorted keys, no spaces); ``TypeError`` naming ``what``.

    The canonical form makes equal values compare equal as text, which is how a journal
    record's input is matched on replay.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} must be a JSON value (dict/list/str/int/float/bool/None, finite numbers, "
            f"str keys): {exc}"
        ) from exc


def loads(text: str) -> Any:
    """The value of JSON ``text`` the store wrote itself."""
    return json.loads(text)
