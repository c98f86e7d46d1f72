"""What the examples share: ending quietly when the reader of their output goes away."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def until_the_reader_leaves(main: Callable[[], None]) -> None:
    """Run ``main``; if its reader stops early (``| head -3``), exit 141 as a writer ended by
    SIGPIPE does, with stdout pointed at nothing so the last flush at exit cannot fail."""
    try:
        main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
