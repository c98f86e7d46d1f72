"""A flaky tool under a retry policy: each attempt runs in a fresh actor, backoff in between.

Run it with ``python -m examples.flaky_retry``.
"""

from __future__ import annotations

from typing import Any

from toolvisor import Agent, CallContext, RetryPolicy, function_tool
from toolvisor.testing import ScriptedModel, call, calls


@function_tool(retryable=True)
def fetch_quote(symbol: str, ctx: CallContext) -> dict[str, Any]:
    """Fetch a stock quote (the upstream fails twice, then answers)."""
    print(f"  attempt {ctx.attempt}")
    if ctx.attempt < 3:
        raise TimeoutError("upstream did not answer")
    return {"symbol": symbol, "price": 12.5}


def main() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.2,
                         reasons={"handler_raised", "timeout"})
    model = ScriptedModel([calls(call("fetch_quote", {"symbol": "ACME"})), "ACME is at 12.5"])
    with Agent(model, [fetch_quote], on_tool_error=policy) as agent:
        outcome = agent.run("What is ACME trading at?")
    print(f"{type(outcome).__name__}: {getattr(outcome, 'text', '')}")


if __name__ == "__main__":
    main()
