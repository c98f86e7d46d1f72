"""The one check of a duration: a setting that takes seconds refuses anything but a finite
number of them, in one wording, wherever it is taken."""

from __future__ import annotations

import math


def is_seconds(value: object, *, positive: bool = False) -> bool:
    """Whether ``value`` is a finite number of seconds (a bool is not), > 0 if ``positive``
    else >= 0."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and (value > 0 if positive else value >= 0))


def check_seconds(name: str, value: object, *, positive: bool = False,
                  optional: bool = False) -> None:
    """Refuse ``value`` unless it is a finite number of seconds (> 0 if ``positive`` else
    >= 0), or ``None`` when ``optional``; the error names the setting ``name``."""
    if (optional and value is None) or is_seconds(value, positive=positive):
        return
    wanted = ("a positive, finite number of seconds" if positive
              else "a finite number of seconds >= 0")
    raise ValueError(f"{name} must be {wanted}{' or None' if optional else ''}, got {value!r}")
