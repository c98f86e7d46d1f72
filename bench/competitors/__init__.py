"""Reproducible timings of competing tool-call runtimes, each driven by its own scripted model.

Measures pydantic-ai, the OpenAI Agents SDK and LangGraph (``ToolNode`` alone and in a minimal
graph) with their default settings: per-call overhead of a no-op sync tool, a batch of sync tools
sleeping 50 ms, and what each does with a hung sync tool. Needs the optional ``bench`` extra;
frameworks that are not installed are reported as such.
"""

from bench.competitors._registry import FRAMEWORKS, Framework
from bench.competitors._runner import BATCH_SIZES, RESULTS_PATH, markdown, run_all, write_json

__all__ = [
    "BATCH_SIZES",
    "FRAMEWORKS",
    "RESULTS_PATH",
    "Framework",
    "markdown",
    "run_all",
    "write_json",
]
