"""Tests of ``toolvisor/worker.py``: worker processes on one store."""
