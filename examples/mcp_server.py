"""A small MCP server (the official SDK's ``MCPServer``), for the MCP examples.

Run it with ``python -m examples.mcp_server`` (stdio): any MCP client can spawn it.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

app = MCPServer("weather")


@app.tool()
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"{city}: 21 C, clear"


@app.tool()
def crash() -> str:
    """Crash the server process in the middle of the call (for the demo)."""
    os._exit(1)


if __name__ == "__main__":
    app.run()
