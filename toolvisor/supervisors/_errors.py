"""The errors of the supervision layer, each naming what was wrong and what to do."""

from __future__ import annotations

from collections.abc import Hashable

from toolvisor.contract import ToolvisorError


class ChildSpecError(ToolvisorError, ValueError):
    """A child spec, or a supervisor's own settings, are invalid."""


class ChildStartError(ToolvisorError, RuntimeError):
    """A child's start function raised, or returned something that is not a supervisable ref,
    or the child's ``on_start`` raised or outlasted the spec's ``start_timeout``.

    ``child_id`` names the child (``None`` for a dynamic one); ``__cause__`` is what the start
    function or ``on_start`` raised, if anything.
    """

    def __init__(self, child_id: Hashable, message: str) -> None:
        who = "a dynamic child" if child_id is None else f"child {child_id!r}"
        super().__init__(f"{who} failed to start: {message}")
        self.child_id = child_id
        self.detail = message


class UnknownChildError(ToolvisorError, LookupError):
    """No child with that id is known to the supervisor."""


class ChildRunningError(ToolvisorError, RuntimeError):
    """The operation needs the child stopped (``restart_child``, ``delete_child``)."""


class ChildRestartingError(ToolvisorError, RuntimeError):
    """The child is restarting: its last restart failed and is being tried again (OTP's
    ``{error, restarting}`` from ``restart_child`` / ``delete_child``); ``terminate_child``
    stops the retries."""


class DuplicateChildError(ToolvisorError, ValueError):
    """``start_child`` was given an id that the supervisor already has."""


class TooManyChildrenError(ToolvisorError, RuntimeError):
    """A dynamic supervisor already has ``max_children`` children: the start is refused."""
