"""``from_string``: a provider's model named by one string, as ``Agent`` accepts it."""

from __future__ import annotations

import os
import re
from typing import Any

from toolvisor.models._adapter import ProviderModel
from toolvisor.models._anthropic import AnthropicModel
from toolvisor.models._openai_chat import OpenAIChatModel
from toolvisor.models._openai_responses import OpenAIResponsesModel

_COMPATIBLE = re.compile(r"(?P<model>.+?)@(?P<base_url>https?://.+)")
_NO_KEY = "not-needed"  # what a local server without keys is sent when OPENAI_API_KEY is unset


def from_string(spec: str, **settings: Any) -> ProviderModel:
    """The model ``spec`` names; ``settings`` go to its adapter (``stream=True``, ...).

    ``openai:<model>`` (Chat Completions), ``openai-responses:<model>`` (the Responses API),
    ``anthropic:<model>``, or ``openai-compatible:<model>@<base_url>`` for any server that
    speaks Chat Completions (vLLM, Ollama, LM Studio, llama.cpp's server, OpenRouter): its key
    is ``OPENAI_API_KEY`` if set. Keys and base URLs otherwise come from the environment, as
    each SDK reads them.
    """
    provider, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"a model string is 'provider:model', got {spec!r}")
    if provider == "openai":
        return OpenAIChatModel(name, **settings)
    if provider == "openai-responses":
        return OpenAIResponsesModel(name, **settings)
    if provider == "anthropic":
        return AnthropicModel(name, **settings)
    if provider == "openai-compatible":
        found = _COMPATIBLE.fullmatch(name)
        if found is None:
            raise ValueError(f"an OpenAI-compatible model string is "
                             f"'openai-compatible:<model>@<base_url>', got {spec!r}")
        return OpenAIChatModel(found["model"], base_url=found["base_url"],
                               api_key=os.environ.get("OPENAI_API_KEY") or _NO_KEY, **settings)
    raise ValueError(f"unknown model provider {provider!r} in {spec!r}; use openai, "
                     "openai-responses, anthropic or openai-compatible")
