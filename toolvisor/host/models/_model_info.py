"""``model_info``: which model an agent asks, as ``ctx.sessions.model()`` says it."""

from __future__ import annotations

from typing import Any

from toolvisor.contract import ModelInfo
from toolvisor.host.observe import model_names


def model_info(model: Any) -> ModelInfo:
    """Which model ``model`` is: provider and name as its spans say them, and the API variant
    where it says one."""
    provider, name = model_names(model)
    module = type(model).__module__
    variant = "responses" if module.endswith("_openai_responses") \
        else "chat_completions" if module.endswith("_openai_chat") else None
    return ModelInfo(provider=provider, name=name, variant=variant)
