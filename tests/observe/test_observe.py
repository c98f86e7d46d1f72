"""The live view's plain-text fallback, its tree drawn into an SVG, and a run's Mermaid
timeline."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.observed_run import observed_run, waiting_run
from toolvisor.observe import Board, live, mermaid_timeline, render, save_svg, write_mermaid
from toolvisor.testing import capture_events


def test_live_prints_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    with capture_events() as events, live(out) as board:
        observed_run()
    lines = out.getvalue().splitlines()
    text = "\n".join(lines)
    for step in ("turn 1 model #1 rate_limited", "turn 1 model #2 ok",
                 "crash (c) #1 handler_raised", "slow (s) #1 timeout",
                 "flaky (f) #1 handler_raised", "flaky (f) #2 ok", "ask (a) #1 ask_user",
                 "retry f in 0 ms", "suspended, waiting on a", "completed after 2 turn(s)"):
        assert step in text, step
    assert events  # the sink that was there before still gets every event
    (run,) = board.runs()  # the resumed run goes on under its run id
    assert run.status == "completed"
    assert [a[1] for a in run.turns[1].calls["f"].attempts] == ["handler_raised", "ok"]


@pytest.mark.parametrize(("seconds", "shown"), [
    (0.17278204661018798, "in 173 ms"), (2.0504, "in 2.1 s"), (0, "in 0 ms")])
def test_a_retry_delay_reads_as_milliseconds_or_seconds(seconds: float, shown: str) -> None:
    board = Board()
    line = board.take("retry_scheduled", {"run_id": "r1", "call_ids": ["c1"],
                                            "seconds": seconds})
    assert line is not None and line.endswith(f"retry c1 {shown}")


def test_the_tree_renders_every_run() -> None:
    with live(io.StringIO()) as board:
        observed_run()
        waiting_run()
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(render(board))
    drawn = console.file.getvalue()  # type: ignore[attr-defined]
    assert "ask_user" in drawn and "completed" in drawn and "(retried)" in drawn


def test_the_tree_saves_as_an_svg_image(tmp_path: Path) -> None:
    with live(io.StringIO()) as board:
        observed_run()
        waiting_run()
    drawn = save_svg(board, tmp_path / "live.svg", title="runs").read_text()
    assert drawn.startswith("<svg") and "runs</text>" in drawn
    text = drawn.replace("&#160;", " ")  # rich keeps spaces as no-break ones
    assert "restarts: 0" in text
    for run in board.runs():
        assert f"run {run.run_id[:8]}" in text
    for shown in ("ask_user", "completed", "turn 1", "flaky", "handler_raised", "(retried)"):
        assert shown in text, shown


def test_a_run_as_a_mermaid_timeline(tmp_path: Path) -> None:
    outcome = observed_run()
    diagram = mermaid_timeline(outcome)
    assert diagram.startswith("timeline\n    title Run completed after 2 turn(s)\n")
    assert "    section Turn 1\n        model : calls crash, slow, flaky, ask\n" in diagram
    assert "        crash c : ✗ handler_raised\n" in diagram
    assert "        flaky f : ✓ second try works\n" in diagram
    assert "    section Turn 2\n        model : answers done\n" in diagram
    written = write_mermaid(outcome, tmp_path / "run.md").read_text()
    assert written == f"```mermaid\n{diagram}```\n"
    assert write_mermaid(outcome, tmp_path / "run.mmd").read_text() == diagram


def test_without_rich_the_tree_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("rich", "rich.console", "rich.live", "rich.tree"):
        monkeypatch.setitem(sys.modules, name, None)
    from toolvisor.observe import Board  # noqa: PLC0415

    hint = "pip install '.[observe]' in toolvisor's clone"
    with pytest.raises(ImportError, match=re.escape(hint)):
        render(Board())
