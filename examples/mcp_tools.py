"""An MCP server as a supervised tool source: a crash mid-call, a restart, the next call works.

A scripted model calls the server's ``forecast``, then ``crash`` (the server process exits
mid-call: the call gets ``handler_exit`` and the connection is restarted under its
supervisor), then ``forecast`` again on the new server. Run it with
``python -m examples.mcp_tools``.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from toolvisor import Agent, CallAttempt, ContinueRun, Decision, ToolError, set_event_sink
from toolvisor.mcp import McpToolProvider
from toolvisor.testing import ScriptedModel, call, calls

SHOWN = {"mcp_connected", "mcp_connection_lost", "child_restarted"}


class Restarts:
    """Prints the supervision events worth seeing, and tells when the restart is done."""

    def __init__(self) -> None:
        self.connected = threading.Semaphore(0)

    def sink(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if event in SHOWN:
            detail = fields.get("why") or fields.get("child_id") or fields.get("source")
            print(f"  [{event}] {detail}")
        if event == "mcp_connected":
            self.connected.release()


def on_tool_error(failed: CallAttempt, error: Any) -> Decision:
    kind = f"crash: {error.reason} ({error.code})" if isinstance(error, ToolError) else error
    print(f"  {failed.call.name} failed -> {kind}")
    return ContinueRun()


def main() -> None:
    restarts = Restarts()
    previous = set_event_sink(restarts.sink)
    weather = McpToolProvider.stdio("weather", [sys.executable, "-m", "examples.mcp_server"])
    model = ScriptedModel({  # a script for each run, by its prompt
        "Weather in Oslo, then crash the server": [
            calls(call("forecast", {"city": "Oslo"})), calls(call("crash", {})),
            "The server crashed."],
        "Weather in Lima": [calls(call("forecast", {"city": "Lima"})), "Lima: 21 C, clear"],
    })
    try:
        with Agent(model, [weather], on_tool_error=on_tool_error) as agent:
            restarts.connected.acquire()
            print("tools:", [s.name for s in agent.registry.specs()])
            first = agent.run("Weather in Oslo, then crash the server")
            print("run 1:", first.messages[2].content, "|", first.text)
            restarts.connected.acquire()  # the restarted connection is up
            second = agent.run("Weather in Lima")
            print("run 2:", second.messages[2].content, "|", second.text)
    finally:
        set_event_sink(previous)


if __name__ == "__main__":
    main()
