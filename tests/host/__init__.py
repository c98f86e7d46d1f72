"""Tests of ``toolvisor.host``: what the orchestrator hosts per run (child sessions, questions,
background processes, direct completions, progress)."""
