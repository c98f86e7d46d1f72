"""Ray, past one machine: ``RayActor`` keeps a stateful tool's state in one Ray actor.

A plain tool moves onto a cluster with ``@tool(isolation="ray")``; both need the
``toolvisor[ray]`` extra, whose SDK is imported on the first ``ray`` call.
"""

from toolvisor.isolation import RayActor

__all__ = ["RayActor"]
