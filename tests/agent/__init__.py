"""Tests of ``toolvisor/agent.py``, the facade: the agent's runs end to end."""
