"""``make demo``: a supervised agent loop on a scripted model, narrated.

One model turn asks for five tool calls: one works, one crashes, one hangs past its timeout,
one reports an error and one asks the user. Each runs in its own supervised actor; the policy
decides what the model sees; the run suspends for the question and resumes with the answer.
No network and no key: the model is a ``ScriptedModel``. ``toolvisor.observe.live`` draws the
runs, turns and calls as they go (plain lines when stdout is not a terminal). Nothing is
written unless asked: ``--timeline PATH`` writes the finished run as a Mermaid timeline
(``--timeline docs/demo-run.md`` makes the one in the docs), ``--svg PATH`` draws the live view
as it stands at the end into an SVG image (``--svg docs/live-view.svg`` makes the README's
picture).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from examples._reader import until_the_reader_leaves
from toolvisor import (
    Agent,
    AskUser,
    CallAttempt,
    CallContext,
    Completed,
    ContinueRun,
    Err,
    Suspended,
    Tool,
    ToolError,
    function_tool,
)
from toolvisor.observe import live, save_svg, write_mermaid
from toolvisor.testing import ScriptedModel, call, calls, capture_events


@function_tool
def weather(city: str) -> dict[str, Any]:
    """Today's weather in a city."""
    return {"city": city, "celsius": 21}


@function_tool
def flights() -> str:
    """Search flights (its backend is broken today)."""
    raise ConnectionError("flight API refused the connection")


@function_tool(timeout=0.2)
def hotels(ctx: CallContext) -> str:
    """Search hotels (hangs; gives up when cancelled)."""
    ctx.cancelled.wait(30)
    return "never seen"


@function_tool
def loyalty() -> Err:
    """Look up a loyalty account (reports that it has none)."""
    return Err("no loyalty account for this traveller")


@function_tool
def book() -> AskUser:
    """Book the trip: needs a human's approval."""
    return AskUser("Book the trip to Lisbon for 840 EUR?", ("yes", "no"))


DECIDED: list[str] = []  # what the policy decided, shown once the run is back


def policy(failed: CallAttempt, error: Any) -> ContinueRun:
    """Crashes become a short note for the model; reported errors go through as they are. (A
    policy decides and returns; it writes nothing, so a closed stdout cannot fail the run.)"""
    kind = f"crash ({error.reason})" if isinstance(error, ToolError) else "reported error"
    DECIDED.append(f"  policy   {failed.call.name:<8} {kind:<25} -> continue")
    if isinstance(error, ToolError):
        return ContinueRun(Err(f"{failed.call.name} is unavailable right now ({error.reason})"))
    return ContinueRun()


def show_events(events: list[dict[str, Any]]) -> None:
    """Each call's life, from the events its actor, the runner and the supervisor logged."""
    lives: dict[str, list[str]] = {}
    exits: list[str] = []
    for event in events:
        name = event["event"]
        if event.get("component") in ("tool_call", "tool_runner") and "tool_name" in event:
            step = f"{name} ({event['outcome']}, {event['duration_ms']:.0f} ms)" \
                if name == "call_finished" else name
            lives.setdefault(event["tool_name"], []).append(step)
        elif name == "child_exited" and event.get("supervisor_id") == "tool_calls":
            exits.append(str(event["reason"]))
    print("  each call ran in its own ToolCallActor under the DynamicSupervisor:")
    for tool_name, steps in lives.items():
        print(f"    {tool_name:<8} " + " -> ".join(steps))
    if exits and set(exits) == {"normal"}:
        print(f"  all {len(exits)} call actors replied once and exited normally, the crash and "
              "the hang too: each failure was caught in its own actor and became that call's "
              "result, so the supervisor had nothing to restart")
    else:
        print(f"  the call actors ended: {', '.join(sorted(set(exits)))}")


def main(svg: Path | None = None, timeline: Path | None = None) -> None:
    """The demo; ``svg``: where to draw the live view once both runs ended; ``timeline``:
    where to write the run as a Mermaid timeline."""
    model = ScriptedModel([
        calls(call("weather", {"city": "Lisbon"}, id="w"), call("flights", id="f"),
              call("hotels", id="h"), call("loyalty", id="l"), call("book", id="b")),
        "Booked: Lisbon, 21 C. Flights and hotels were unavailable; no loyalty account.",
    ])
    tools: list[Tool] = [weather, flights, hotels, loyalty, book]
    print("toolvisor demo: one model turn, five tool calls, each in its own supervised actor\n")
    with capture_events() as events, live() as board, \
            Agent(model, tools, name="travel", on_tool_error=policy) as agent:
        first = agent.run("Plan and book my trip to Lisbon")
        assert isinstance(first, Suspended)
        print("\n".join(DECIDED))
        show_events(events)
        question = first.questions[0]
        print(f"\n  suspended: {question.question} {question.options}  (call {question.call_id})")
        print("  the human answers: yes\n")
        outcome = agent.resume(first, "yes")
        stats = agent.runner.stats
    if svg is not None:
        print(f"the live view as an image: {save_svg(board, svg)}")
    assert isinstance(outcome, Completed)
    print("\nwhat the model was shown for each call:")
    for message in model.requests[1].messages:
        if message.role == "tool":
            print(f"  {message.tool_call_id}  {message.name:<8} {message.content}")
    print(f"\nfinal answer ({outcome.turns} model turns): {outcome.text}")
    if timeline is not None:
        print(f"the run as a Mermaid timeline: {write_mermaid(outcome, timeline)}")
    print(f"runner: {stats.calls_started} calls ({outcome.turns} of them to the model), "
          f"{stats.timeouts} timed out, "
          f"{stats.threads_abandoned} thread abandoned")
    model.assert_finished()
    json.dumps(outcome.model_dump(mode="json"))  # the whole outcome is plain JSON


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="toolvisor's demo: a supervised agent loop")
    parser.add_argument("--svg", type=Path, help="also draw the live view into this SVG file")
    parser.add_argument("--timeline", type=Path,
                        help="also write the run as a Mermaid timeline into this file")
    arguments = parser.parse_args()
    until_the_reader_leaves(lambda: main(arguments.svg, arguments.timeline))
