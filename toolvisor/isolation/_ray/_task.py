"""What runs on the Ray cluster: one call through ``execute``, its result pickled back; the
handler's context is served by the agent over a link the task opens on first use."""

from __future__ import annotations

from typing import Any

from toolvisor.call import execute
from toolvisor.contract import Tool
from toolvisor.isolation._link._remote_context import (
    ContextLink,
    RemoteCall,
    remote_context,
    traced,
)
from toolvisor.isolation._process._worker import dump_result
from toolvisor.isolation._ray._links import LinkAddress

CallFields = tuple[RemoteCall, LinkAddress]
"""What of the context crosses to the cluster, and where the task reaches the rest of it."""


def run_task(tool: Tool, arguments: Any, fields: CallFields) -> bytes:
    """Run ``tool``'s handler once and return the pickled result (a Ray task's body)."""
    call, address = fields
    link = ContextLink(address.connect)
    try:
        ctx = remote_context(call, link)
        with traced(call, link):
            result = execute(tool, arguments, ctx)
        return dump_result(result, ctx, tool.name)
    finally:
        link.close()
