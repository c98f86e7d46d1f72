"""``live()``: a tree of runs, turns and calls on the terminal while they happen.

It listens to toolvisor's log events (the sink it installs passes every event on to the sink
that was there before, so logging and ``capture_events`` keep working). On a terminal it draws
a ``rich`` live tree (``toolvisor[observe]``); anywhere else it prints one plain line per
step, with no ``rich`` needed.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from toolvisor._logging import EventSink, set_event_sink
from toolvisor.observe._board import Board, RunView, at_time, is_good

if TYPE_CHECKING:
    from rich.tree import Tree


def _attempts(attempts: list[tuple[int, str, float | None]]) -> str:
    parts = []
    for attempt, status, duration in attempts:
        mark = "" if status == "running" else "[green]✓[/]" if is_good(status) else "[red]✗[/]"
        took = "" if duration is None else f" {duration:.1f} ms"
        parts.append(f"#{attempt} {mark} {status}{took}")
    return "  ↻ ".join(parts)


def _rich() -> ModuleType:
    """``rich`` (only for the terminal view and its picture), or an ``ImportError`` naming the
    extra that installs it."""
    try:
        import rich.console  # noqa: PLC0415
        import rich.live  # noqa: PLC0415
        import rich.markup  # noqa: PLC0415
        import rich.tree  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError("the live view's tree needs rich: pip install '.[observe]' in "
                          "toolvisor's clone "
                          "(without a terminal, live() prints plain lines and needs none)"
                          ) from exc
    return rich


def render(board: Board) -> Tree:
    """The board as a ``rich`` tree."""
    root: Tree = _rich().tree.Tree(f"[bold]toolvisor[/]  restarts: {board.restarts}  "
                                   f"abandoned threads: {board.abandoned}")
    runs = board.runs()
    known = {run.run_id for run in runs}
    children: dict[tuple[str, str], list[RunView]] = {}
    for run in runs:
        if run.parent is not None and run.parent[0] in known:
            children.setdefault(run.parent, []).append(run)
    for run in runs:
        if run.parent is None or run.parent[0] not in known:
            _render_run(root, run, children)
    return root


def save_svg(board: Board, path: str | Path, *, width: int = 100,
             title: str = "toolvisor live view") -> Path:
    """Draw the board's tree as it stands into an SVG file at ``path`` (``rich``'s terminal
    export, colours and all), so a picture of the live view is made from a real run rather
    than by hand. Returns the path."""
    console = _rich().console.Console(record=True, file=io.StringIO(), width=width,
                                      force_terminal=True, color_system="truecolor")
    console.print(render(board))
    target = Path(path)
    console.save_svg(str(target), title=title)
    return target


def _render_run(root: Tree, run: RunView,
                children: dict[tuple[str, str], list[RunView]]) -> None:
    """A run's branch; a child session's run is drawn under the call that started it."""
    colour = "yellow" if run.status in ("running", "suspended") \
        else "green" if is_good(run.status) else "red"
    branch = root.add(f"run {run.run_id[:8]} [{colour}]{run.status}[/]")
    for number, turn in sorted(run.turns.items()):
        node = branch.add(f"turn {number}")
        if turn.model:
            node.add(f"model  {_attempts(turn.model)}")
        for call_id, call in turn.calls.items():
            retried = "  (retried)" if len(call.attempts) > 1 else ""
            expires = "" if call.expires_at is None else \
                f"  [yellow]asks until {at_time(call.expires_at)}[/]"
            running = bool(call.attempts) and call.attempts[-1][1] == "running"
            progress = "" if call.progress is None or not running \
                else f"  [cyan]{_rich().markup.escape(call.progress)}[/]"
            leaf = node.add(f"{call.tool_name} [dim]{call_id}[/]  "
                            f"{_attempts(call.attempts)}{retried}{expires}{progress}")
            for child in children.get((run.run_id, call_id), ()):
                _render_run(leaf, child, children)


@contextmanager
def live(stream: TextIO | None = None, *, refresh_per_second: float = 8) -> Iterator[Board]:
    """Show the runs of every agent while the block runs; yields the :class:`Board`.

    ``stream`` defaults to stdout; a stream that is not a terminal gets plain lines.
    """
    out = stream or sys.stdout
    board = Board()
    lock = threading.Lock()
    tty = out.isatty()
    previous: EventSink | None = None

    def sink(level: str, event: str, fields: dict[str, Any]) -> None:
        line = board.take(event, fields)
        if line is not None and not tty:
            with lock:
                print(line, file=out, flush=True)
        if previous is not None:
            previous(level, event, fields)

    previous = set_event_sink(sink)
    try:
        if not tty:
            yield board
            return
        rich = _rich()
        with rich.live.Live(get_renderable=lambda: render(board),
                            console=rich.console.Console(file=out),
                            refresh_per_second=refresh_per_second):
            yield board
    finally:
        set_event_sink(previous)
