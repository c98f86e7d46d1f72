"""``model_info``: which model an agent asks, as ``ctx.sessions.model()`` and its spans say it."""

from __future__ import annotations

from typing import Any

from toolvisor.contract import ModelInfo


def model_info(model: Any) -> ModelInfo:
    """Which model ``model`` is: provider, name, and the API variant where it says one."""
    module = type(model).__module__
    provider = "anthropic" if module.endswith("_anthropic") \
        else "openai" if module.startswith("toolvisor.models") else type(model).__name__
    name = str(getattr(model, "model", None) or type(model).__name__)
    variant = "responses" if module.endswith("_openai_responses") \
        else "chat_completions" if module.endswith("_openai_chat") else None
    return ModelInfo(provider=provider, name=name, variant=variant)
