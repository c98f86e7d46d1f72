"""Tests of ``toolvisor.isolation``: the backends (process, Ray, sandbox, plug-ins) and the
context link."""
