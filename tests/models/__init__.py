"""Tests of ``toolvisor.models``: the provider adapters over their real SDKs."""
