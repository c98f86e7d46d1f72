"""Testing a failure policy with plain function calls: no threads, no model, no network.

Run it with ``python -m examples.policy_in_isolation`` (or copy the asserts into a test).
"""

from __future__ import annotations

from typing import Any

from toolvisor import CallAttempt, ContinueRun, Err, HaltRun, Ok, RetryAfter, Tool, ToolError
from toolvisor.testing import MachineConfig, call, calls, decide, drive


def payments_policy(failed: CallAttempt, error: Any) -> ContinueRun | HaltRun | RetryAfter:
    """Retry timeouts of retryable tools once; halt on any crash of 'charge'; else continue."""
    if isinstance(error, ToolError) and error.reason == "timeout" and failed.retryable \
            and failed.attempt == 1:
        return RetryAfter(0.5)
    if failed.call.name == "charge" and isinstance(error, ToolError):
        return HaltRun()
    return ContinueRun()


def main() -> None:
    timeout = ToolError("timeout")
    assert decide(payments_policy, "lookup", timeout, retryable=True) == RetryAfter(0.5)
    assert decide(payments_policy, "lookup", timeout, retryable=True, attempt=2) == ContinueRun()
    assert decide(payments_policy, "charge", ToolError("handler_raised")) == HaltRun()
    assert decide(payments_policy, "charge", "card declined") == ContinueRun()
    print("decide(): four decisions checked")

    def charge(arguments: dict[str, Any]) -> Ok:
        raise RuntimeError("gateway crashed")

    config = MachineConfig(tools=[Tool(name="charge", handler=charge),
                                  Tool(name="lookup", handler=lambda a: Err("unknown"))],
                           on_tool_error=payments_policy)
    result = drive(config, "charge the card",
                   model=[calls(call("lookup"), call("charge"))])
    print(f"drive(): the whole run, inline -> {type(result.outcome).__name__}"
          f"({getattr(result.outcome, 'reason', '')}) after {len(result.trace)} effects")


if __name__ == "__main__":
    main()
