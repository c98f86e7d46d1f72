"""What runs on the Ray cluster: one call through ``execute``, its result pickled back."""

from __future__ import annotations

from typing import Any

from toolvisor.contract import CallContext, Tool, ToolCall
from toolvisor.executor._execute import execute
from toolvisor.executor._worker import dump_result

CallFields = tuple[str | None, str | None, ToolCall | None, int]
"""What of the context crosses to the cluster: session id, request id, tool call, attempt."""


def run_task(tool: Tool, arguments: Any, fields: CallFields) -> bytes:
    """Run ``tool``'s handler once and return the pickled result (a Ray task's body)."""
    session_id, request_id, tool_call, attempt = fields
    ctx = CallContext(session_id=session_id, request_id=request_id, tool_call=tool_call,
                      attempt=attempt)
    return dump_result(execute(tool, arguments, ctx), ctx, tool.name)
