"""Handlers that hang a host's child process for tests/isolation/test_host_death.py: each says so,
then burns the CPU for ever (only a kill ends it)."""

from __future__ import annotations

from typing import Any

from toolvisor import CallContext, Ok


def spin(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Reports ``spinning`` as its progress, then never returns nor reads its pipe."""
    ctx.report_progress("spinning")
    while True:
        pass
