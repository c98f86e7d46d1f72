"""Tools the Temporal tests run in worker processes (importable there by module name)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolvisor import function_tool


@function_tool(timeout=1, isolation="process")
def hang(marker: str) -> str:
    """Write this process's id to ``marker``.pid, hang, then write ``marker`` (the side
    effect that must never land once the call was stopped)."""
    Path(f"{marker}.pid").write_text(str(os.getpid()))
    time.sleep(60)
    Path(marker).write_text("landed")
    return "finished"
