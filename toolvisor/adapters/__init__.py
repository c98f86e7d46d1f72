"""Supervised tool calls inside the loops people already use: pydantic-ai
(``toolvisor.adapters.pydantic_ai``), LangGraph (``toolvisor.adapters.langgraph``) and the
OpenAI Agents SDK (``toolvisor.adapters.openai_agents``), each behind its own extra and imported
only when used. What they share is here: ``SupervisedCalls`` runs one call under toolvisor's
runner and supervision, with the tool's gates, a span and, with a store, replay by
``tool_call_id``."""

from toolvisor.adapters._calls import Finished, SupervisedCalls
from toolvisor.adapters._errors import ToolHalted
from toolvisor.adapters._journal import CallJournal

__all__ = ["CallJournal", "Finished", "SupervisedCalls", "ToolHalted"]
