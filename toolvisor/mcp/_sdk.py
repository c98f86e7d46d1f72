"""The MCP SDK is an extra: it is imported only where a connection or a server needs it."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRA_HINT = ("MCP support needs the official MCP SDK: pip install '.[mcp]' in toolvisor's "
              "clone")


def load(module: str) -> ModuleType:
    """Import ``toolvisor.mcp.<module>``, which imports the SDK; a clear ``ImportError``
    naming the extra when it is missing."""
    try:
        return importlib.import_module(f"toolvisor.mcp.{module}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("mcp", "mcp_types", "anyio"):
            raise ImportError(f"{EXTRA_HINT} ({exc.name} is not installed)") from exc
        raise
