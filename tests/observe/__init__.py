"""Tests of ``toolvisor.observe`` and of what a run shows: log events, traces, the live view."""
