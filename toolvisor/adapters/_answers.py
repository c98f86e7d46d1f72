"""Whether an answer fits the question a call asked (``AskUser``): with options, it must be
one of them, a ``str``. The adapters check an answer before it becomes the call's result, so
a wrong one changes nothing: the call still waits on its question."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def answer_refusal(tool_call_id: str, question: str, options: Sequence[str] | None,
                   answer: Any) -> str | None:
    """Why ``answer`` cannot answer the question ``question`` of call ``tool_call_id``
    (offering ``options``, or ``None`` for a free answer); ``None`` when it can."""
    if options is None or (isinstance(answer, str) and answer in options):
        return None
    return (f"the answer to {tool_call_id} ({question!r}) must be one of {list(options)}, "
            f"got {answer!r}")
