"""One OpenTelemetry span per adapter call: ``execute_tool {tool}``, after the GenAI semantic
conventions, a child of whatever span is current where the framework calls the tool (its own
tool span, if it traces with OpenTelemetry). ``opentelemetry`` is imported only when a tracer
provider is given."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolvisor.contract import Err, HandlerResult, ToolError, result_outcome

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider


@dataclass(frozen=True, slots=True)
class CallSpan:
    """One call's span; :meth:`end` once, on whichever thread the call ends."""

    span: Span

    def scope(self) -> AbstractContextManager[Any]:
        """The span as the current one where the handler runs (not ended on exit)."""
        from opentelemetry.trace import use_span  # noqa: PLC0415

        return use_span(self.span, end_on_exit=False, record_exception=False,
                        set_status_on_exception=False)

    def end(self, result: HandlerResult, text: str, *, replayed: bool = False) -> None:
        """Set the outcome (``error.type`` and status ``ERROR`` for a failure) and end."""
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

        outcome = result_outcome(result)
        self.span.set_attribute("toolvisor.call.outcome", outcome)
        if replayed:
            self.span.set_attribute("toolvisor.call.replayed", True)
        if isinstance(result, Err):
            self.span.set_attribute("error.type", "tool_error" if outcome == "err" else outcome)
            if isinstance(result.reason, ToolError) and result.reason.code is not None:
                self.span.set_attribute("toolvisor.error.code", result.reason.code)
            self.span.set_status(Status(StatusCode.ERROR, text[:4096]))
        self.span.end()


class CallTracing:
    """Makes the calls' spans with ``provider``'s tracer. Stateless past its tracer."""

    def __init__(self, provider: TracerProvider) -> None:
        self._tracer = provider.get_tracer("toolvisor.adapters")

    def start(self, tool_name: str, tool_call_id: str, isolation: str) -> CallSpan:
        """The span of one call, parented by the current span."""
        return CallSpan(self._tracer.start_span(f"execute_tool {tool_name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": tool_call_id, "gen_ai.tool.type": "function",
            "toolvisor.isolation": isolation}))
