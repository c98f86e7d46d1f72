"""Tests of ``toolvisor.contract``: results, errors, tools and handlers."""
