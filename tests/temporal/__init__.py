"""The tests of toolvisor.temporal: runs on a real Temporal dev server and the time-skipping test server."""
