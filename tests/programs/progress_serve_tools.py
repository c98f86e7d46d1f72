"""Tools that report progress, served over MCP by the progress tests (``python -m
toolvisor.cli mcp serve tests.programs.progress_serve_tools:tools``): one in a thread, one in a
worker process."""

from __future__ import annotations

from toolvisor import CallContext, Ok, Tool


def build_report(arguments: dict[str, object], ctx: CallContext) -> Ok:
    """Reports two steps, the second with the share done, then returns the report."""
    ctx.report_progress("gathered the figures")
    ctx.report_progress("drew the charts", 0.75)
    return Ok("report.pdf")


tools = [Tool(name="build_report", handler=build_report, input_schema={"type": "object"}),
         Tool(name="build_report_in_process", handler=build_report,
              input_schema={"type": "object"}, isolation="process")]
