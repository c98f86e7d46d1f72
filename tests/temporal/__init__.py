"""Tests of ``toolvisor.temporal``: runs on a real Temporal dev server and test server."""
