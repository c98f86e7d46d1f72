"""Real models: OpenAI (Chat Completions and Responses), Anthropic and any OpenAI-compatible
server, each through its official SDK's async client.

Each adapter imports its SDK when it is built: ``toolvisor[openai]`` and
``toolvisor[anthropic]`` install them.
"""

from toolvisor.models._adapter import ProviderModel
from toolvisor.models._anthropic import AnthropicModel
from toolvisor.models._from_string import from_string
from toolvisor.models._openai_chat import OpenAIChatModel
from toolvisor.models._openai_responses import OpenAIResponsesModel

__all__ = [
    "AnthropicModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderModel",
    "from_string",
]
