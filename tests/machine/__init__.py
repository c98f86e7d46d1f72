"""Tests of ``toolvisor.machine``: the pure ``TurnMachine``, its policies and outcomes."""
