"""Seeing what the supervisors did: a live tree of runs (``live``; ``save_svg`` draws it into
an image) and a run's Mermaid timeline (``mermaid_timeline``, ``write_mermaid``). Log events
and traces are in ``docs/observability.md``."""

from toolvisor.observe._board import Board, CallView, RunView, TurnView
from toolvisor.observe._live import live, render, save_svg
from toolvisor.observe._mermaid import mermaid_timeline, write_mermaid

__all__ = [
    "Board",
    "CallView",
    "RunView",
    "TurnView",
    "live",
    "mermaid_timeline",
    "render",
    "save_svg",
    "write_mermaid",
]
