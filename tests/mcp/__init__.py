"""Tests of ``toolvisor.mcp``: MCP servers as tool sources, tools served over MCP, progress."""
