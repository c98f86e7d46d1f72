"""Real models: OpenAI (Chat Completions and Responses), Anthropic and any OpenAI-compatible
server, each through its official SDK's async client.

Each adapter imports its SDK when it is built: ``toolvisor[openai]`` and
``toolvisor[anthropic]`` install them. A model of your own is anything with
``respond(ModelRequest) -> ModelResponse`` (``Model``) or ``async arespond`` (``AsyncModel``);
the messages, specs and usage it reads and answers are here too.
"""

from toolvisor.contract import (
    AssistantMessage,
    AsyncModel,
    FinishReason,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    report_model_progress,
)
from toolvisor.models._adapter import ProviderModel
from toolvisor.models._anthropic import AnthropicModel
from toolvisor.models._from_string import from_string
from toolvisor.models._openai_chat import OpenAIChatModel
from toolvisor.models._openai_responses import OpenAIResponsesModel

__all__ = [
    "AnthropicModel",
    "AssistantMessage",
    "AsyncModel",
    "FinishReason",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderModel",
    "SystemMessage",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "from_string",
    "report_model_progress",
]
