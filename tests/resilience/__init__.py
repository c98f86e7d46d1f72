"""Tests of ``toolvisor.resilience``: breakers, rate limits, bulkheads and the tool gate."""
