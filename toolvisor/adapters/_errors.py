"""What the adapters raise into their framework's loop, and the check of a framework's extra."""

from __future__ import annotations

from toolvisor.contract import Halt, ToolvisorError


class ToolHalted(ToolvisorError, RuntimeError):
    """A tool returned ``Halt``: the framework's run stops (none of the three has a halt of
    its own), with the tool's reason in ``halt``."""

    def __init__(self, tool_name: str, tool_call_id: str, halt: Halt) -> None:
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.halt = halt
        super().__init__(f"tool {tool_name!r} (call {tool_call_id}) halted the run: "
                         f"{halt.reason}")


def missing_extra(module: str, extra: str) -> ImportError:
    """The error an adapter raises when its framework is not installed: which extra to add."""
    return ImportError(
        f"toolvisor.adapters.{extra.replace('-', '_')} needs {module}, which is not installed: "
        f"pip install '.[{extra}]' in toolvisor's clone")
