"""Tests of ``toolvisor.testing``: scripted models and the pytest plugin."""
