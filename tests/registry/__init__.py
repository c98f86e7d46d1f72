"""Tests of ``toolvisor.registry``: the tool registry and catalog."""
