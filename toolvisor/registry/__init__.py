"""Tool providers and the agent's catalog: which tools the model is offered and may run."""

from toolvisor.registry._local import DynamicToolProvider, StaticToolProvider
from toolvisor.registry._provider import PreparedCall, ToolManifest, ToolProvider
from toolvisor.registry._registry import ToolRegistry
from toolvisor.registry._state import (
    GenerationMismatchError,
    RestoreReport,
    SourceState,
    ToolState,
    UnknownSourceError,
    UnknownToolError,
)

__all__ = [
    "DynamicToolProvider",
    "GenerationMismatchError",
    "PreparedCall",
    "RestoreReport",
    "SourceState",
    "StaticToolProvider",
    "ToolManifest",
    "ToolProvider",
    "ToolRegistry",
    "ToolState",
    "UnknownSourceError",
    "UnknownToolError",
]
