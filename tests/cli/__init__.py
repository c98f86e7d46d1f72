"""Tests of ``toolvisor/cli.py``, the command line."""
