"""The output budget: a pure projector that bounds what one tool output may cost the model.

An output under every cap passes untouched (the very same ``str``). Over a cap, one end of it
is kept exactly (the head by default, the tail for tools declaring ``output_window="tail"``)
and a marker line says how much was left out. The marker's room is taken from the budget, so a
projected output is itself under every cap and projecting it again changes nothing: that makes
the projector safe to apply at more than one point of the loop. The budget never cuts errors:
the model needs an error to fix its call. An error has its own, larger cap instead, applied
where results are encoded (:func:`keep_ends`): its head and its tail are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from toolvisor.contract import OutputWindow

ProjectionPoint: TypeAlias = Literal["dispatch", "request", "history"]
"""Where an output can be projected: when a call's result is dispatched, when the next model
request is built, when the history is stored."""

BudgetUnit: TypeAlias = Literal["bytes", "tokens", "lines"]

MIN_BYTES = 64
"""The smallest byte budget: room for the marker and a little of the output."""

MAX_ERROR_BYTES = 65536
"""The default cap on the text of one error (64 KiB, UTF-8): far above the output budget, so
only a runaway message (a huge exception text, a huge ``Err`` value) is ever cut."""

_UTF8_MAX = 4
_CONTINUATION_MASK = 0xC0
_CONTINUATION = 0x80


def count_lines(text: str) -> int:
    """Lines as the budget counts them: ``\\n``-separated, a final ``\\n`` ends the last line."""
    if not text:
        return 0
    newlines = text.count("\n")
    return newlines if text.endswith("\n") else newlines + 1


def _marker(count: int, unit: BudgetUnit) -> str:
    """The line that stands for what was left out: ``...N bytes truncated...``."""
    return f"...{count} {unit} truncated..."


def _utf8(text: str) -> bytes:
    # surrogatepass: a str holding a lone surrogate still has a length and a cut point.
    return text.encode("utf-8", "surrogatepass")


def _head_lines(text: str, keep: int) -> str:
    """The first ``keep`` lines, each with its newline (``text`` has more than ``keep``)."""
    end = -1
    for _ in range(keep):
        end = text.find("\n", end + 1)
    return text[: end + 1]


def _tail_lines(text: str, keep: int) -> str:
    """The last ``keep`` lines, with the text's own final newline if it has one."""
    start = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(keep):
        start = text.rfind("\n", 0, start)
    return text[start + 1 :]


def _window_lines(text: str, keep: int, window: OutputWindow) -> str:
    return _head_lines(text, keep) if window == "head" else _tail_lines(text, keep)


def _head_bytes(encoded: bytes, room: int) -> bytes:
    """The longest prefix of at most ``room`` bytes that ends on a character boundary."""
    cut = room
    while cut > 0 and encoded[cut] & _CONTINUATION_MASK == _CONTINUATION:
        cut -= 1
    return encoded[:cut]


def _tail_bytes(encoded: bytes, room: int) -> bytes:
    """The longest suffix of at most ``room`` bytes that starts on a character boundary."""
    start = len(encoded) - room
    while start < len(encoded) and encoded[start] & _CONTINUATION_MASK == _CONTINUATION:
        start += 1
    return encoded[start:]


def keep_ends(text: str, max_bytes: int) -> str:
    """``text`` if its UTF-8 form fits in ``max_bytes``; else its head and its tail, each cut
    on a character boundary, around a ``...N bytes truncated...`` line, within ``max_bytes``
    in all (so keeping the ends of the result again changes nothing).

    What errors get instead of the output budget: the start of an error says what failed, its
    end (the innermost cause) usually says where.
    """
    if len(text) * _UTF8_MAX <= max_bytes:
        return text
    encoded = _utf8(text)
    total = len(encoded)
    if total <= max_bytes:
        return text
    room = max_bytes - len(_marker(total, "bytes")) - 2  # the marker and its two newlines
    head = _head_bytes(encoded, room - room // 2)
    tail = _tail_bytes(encoded, room // 2)
    omitted = total - len(head) - len(tail)
    return (f"{head.decode('utf-8', 'surrogatepass')}\n{_marker(omitted, 'bytes')}\n"
            f"{tail.decode('utf-8', 'surrogatepass')}")


def check_error_cap(max_error_bytes: int | None) -> None:
    """Raise ``ValueError`` unless ``max_error_bytes`` is ``None`` or at least ``MIN_BYTES``."""
    if max_error_bytes is not None and (
            isinstance(max_error_bytes, bool) or not isinstance(max_error_bytes, int)
            or max_error_bytes < MIN_BYTES):
        raise ValueError(f"max_error_bytes must be an int of at least {MIN_BYTES} (room for the "
                         f"truncation marker) or None for no cap, got {max_error_bytes!r}")


def _check_positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"OutputBudget.{name} must be a positive int or None, got {value!r}")


@dataclass(frozen=True, slots=True)
class OutputBudget:
    """Caps on one output: bytes (UTF-8), lines and, optionally, estimated tokens.

    Tokens are estimated as ``ceil(bytes / bytes_per_token)``, so ``max_tokens`` is a byte cap
    of ``max_tokens * bytes_per_token``. ``None`` turns a cap off. Each byte cap must leave at
    least :data:`MIN_BYTES` bytes, room for the marker.
    """

    max_bytes: int | None = 16384
    max_lines: int | None = 400
    max_tokens: int | None = None
    bytes_per_token: int = 4
    _byte_cap: int | None = field(init=False, repr=False, compare=False)
    _byte_unit: BudgetUnit = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_lines", "max_tokens", "bytes_per_token"):
            _check_positive(name, getattr(self, name))
        if self.max_bytes is not None and self.max_bytes < MIN_BYTES:
            raise ValueError(f"OutputBudget.max_bytes must be at least {MIN_BYTES} (room for "
                             f"the truncation marker), got {self.max_bytes}")
        token_bytes = None if self.max_tokens is None else self.max_tokens * self.bytes_per_token
        if token_bytes is not None and token_bytes < MIN_BYTES:
            raise ValueError(
                f"OutputBudget.max_tokens * bytes_per_token must be at least {MIN_BYTES} bytes "
                f"(room for the truncation marker), got {self.max_tokens} * "
                f"{self.bytes_per_token} = {token_bytes}"
            )
        byte_cap, unit = self.max_bytes, "bytes"
        if token_bytes is not None and (byte_cap is None or token_bytes < byte_cap):
            byte_cap, unit = token_bytes, "tokens"
        object.__setattr__(self, "_byte_cap", byte_cap)
        object.__setattr__(self, "_byte_unit", unit)

    def fits(self, text: str) -> bool:
        """Whether ``text`` is under every cap (and so passes untouched)."""
        if self.max_lines is not None and count_lines(text) > self.max_lines:
            return False
        cap = self._byte_cap
        return cap is None or len(text) * _UTF8_MAX <= cap or len(_utf8(text)) <= cap

    def truncate(self, text: str, *, window: OutputWindow = "head") -> Truncation | None:
        """What of ``text`` is kept and what the marker says, or ``None`` if it fits.

        Lines go first: past the line cap, the window keeps ``max_lines - 1`` whole lines (one
        line is the marker's). Then bytes: past the byte room left after the marker, the
        window is cut on a UTF-8 character boundary and the marker counts every omitted byte
        (tokens, ``ceil(omitted bytes / bytes_per_token)``, when the token cap is the tighter
        one). Only when the line cut was enough does the marker count lines.
        """
        if window not in ("head", "tail"):
            raise ValueError(f"window must be 'head' or 'tail', got {window!r}")
        if self.fits(text):
            return None
        kept = text
        unit: BudgetUnit = "lines"
        count = 0
        keep_lines = None if self.max_lines is None else self.max_lines - 1
        if keep_lines is not None and count_lines(text) > keep_lines + 1:
            kept = _window_lines(text, keep_lines, window)
            count = count_lines(text) - keep_lines
        cap = self._byte_cap
        if cap is not None:
            total = len(_utf8(text))
            # The largest marker this text can need, and the newline that may precede it.
            room = cap - len(_marker(total, "tokens")) - 1
            encoded = _utf8(kept)
            if len(encoded) > room:
                cut = _head_bytes(encoded, room) if window == "head" else _tail_bytes(encoded,
                                                                                      room)
                kept = cut.decode("utf-8", "surrogatepass")
                if keep_lines is not None and count_lines(kept) > keep_lines:
                    kept = _window_lines(kept, keep_lines, window)
                omitted = total - len(_utf8(kept))
                unit = self._byte_unit
                count = omitted if unit == "bytes" else -(-omitted // self.bytes_per_token)
        return Truncation(kept=kept, count=count, unit=unit, window=window)

    def project(self, text: str, *, window: OutputWindow = "head", is_error: bool = False) -> str:
        """``text`` bounded by the budget: the same object if it fits (or ``is_error``), else
        the kept window and the marker line (see :meth:`truncate` and :meth:`Truncation.render`).
        """
        if is_error:
            return text
        truncation = self.truncate(text, window=window)
        return text if truncation is None else truncation.render()


@dataclass(frozen=True, slots=True)
class Truncation:
    """One end of an output kept exactly, and the marker for the rest.

    ``kept`` is a prefix (``window="head"``) or suffix (``"tail"``) of the output; ``count``
    is how many ``unit`` were left out.
    """

    kept: str
    count: int
    unit: BudgetUnit
    window: OutputWindow

    @property
    def marker(self) -> str:
        return _marker(self.count, self.unit)

    def render(self) -> str:
        """The marker on its own line after (head) or before (tail) the kept text."""
        if not self.kept:
            return self.marker
        if self.window == "tail":
            return f"{self.marker}\n{self.kept}"
        newline = "" if self.kept.endswith("\n") else "\n"
        return f"{self.kept}{newline}{self.marker}"


DEFAULT_BUDGET = OutputBudget()


@dataclass(frozen=True, slots=True)
class OutputProjection:
    """Where an agent's one budget applies: each point on or off.

    ``dispatch`` (default on) bounds the result as it leaves its call, so the policy, the
    history and the model all see the same text. ``request`` bounds outputs only in the request
    sent to the model, keeping the full text in the history; ``history`` bounds what is stored.
    A projected output is under every cap, so enabling several points never cuts twice.
    """

    budget: OutputBudget = DEFAULT_BUDGET
    at_dispatch: bool = True
    at_request: bool = False
    at_history: bool = False

    def applies_at(self, point: ProjectionPoint) -> bool:
        """Whether the budget is applied at ``point``."""
        if point == "dispatch":
            return self.at_dispatch
        if point == "request":
            return self.at_request
        if point == "history":
            return self.at_history
        raise ValueError(f"projection point must be 'dispatch', 'request' or 'history', "
                         f"got {point!r}")

    def project(
        self,
        point: ProjectionPoint,
        text: str,
        *,
        window: OutputWindow = "head",
        is_error: bool = False,
    ) -> str:
        """``text`` projected by the budget if it applies at ``point``, else ``text`` itself."""
        if not self.applies_at(point):
            return text
        return self.budget.project(text, window=window, is_error=is_error)
