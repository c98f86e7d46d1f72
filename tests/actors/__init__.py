"""Tests of ``toolvisor.actors``: the per-call actors, the pooled threads they run on, and what
a call holds while it runs and leaves behind."""
