"""Tests of ``toolvisor.call``: ``execute``, ``encode`` and the output budget."""
