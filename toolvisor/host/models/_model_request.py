"""``request_for_model``: the request a run's ``LlmCall`` becomes on its way to the model.

The run's own catalog decides which tools the model sees; the output budget may bound the tool
results it reads. A pure function of its arguments, called on the orchestrator's thread.
"""

from __future__ import annotations

from toolvisor.call import OutputProjection
from toolvisor.contract import ModelRequest, ToolResultMessage
from toolvisor.host._run_catalog import RunCatalog


def request_for_model(catalog: RunCatalog, projection: OutputProjection,
                      request: ModelRequest, hidden: frozenset[str] = frozenset()
                      ) -> ModelRequest:
    """The run's ``catalog`` decides which tools the model sees, less the ``hidden`` ones
    (their breaker is open); the budget may bound tool texts."""
    messages = request.messages
    if projection.applies_at("request"):
        messages = tuple(
            m.model_copy(update={"content": projection.project(
                "request", m.content, window=catalog.output_window(m.name),
                is_error=m.is_error)})
            if isinstance(m, ToolResultMessage) else m
            for m in messages
        )
    # Every part is a validated model already: validating them again costs ~1 ms a turn.
    specs = catalog.specs()
    if hidden:
        specs = tuple(spec for spec in specs if spec.name not in hidden)
    return ModelRequest.model_construct(messages=messages, tools=specs, attempt=request.attempt)
