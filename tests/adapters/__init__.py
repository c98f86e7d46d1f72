"""Tests of ``toolvisor.adapters``: supervised calls inside pydantic-ai, LangGraph and the
OpenAI Agents SDK."""
