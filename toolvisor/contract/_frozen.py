"""``FrozenModel``: the one base of toolvisor's immutable pydantic values."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """A pydantic model that never changes once built and refuses unknown fields: the base of
    the values toolvisor passes between threads and stores (messages, effects, outcomes,
    checkpoints, catalog and breaker states)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
