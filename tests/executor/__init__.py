"""Tests of ``toolvisor.executor``: the ``ToolRunner`` and its deadlines."""
