"""Tests of ``toolvisor.durable``: the run stores, keys, leases and claims, and durable runs
across real crashes."""
