"""pykka actors: ``ToolCallActor`` (one per tool call, inline or parked) and the batch
dispatcher."""

from toolvisor.actors._dispatch import BatchCall, ToolCallDispatcher
from toolvisor.actors._pooled import ActorThreadPool, PooledThreadingActor
from toolvisor.actors._tool_call import (
    CallReply,
    InlineCallActor,
    ParkedCallActor,
    ToolCallActor,
    call_actor_class,
)

__all__ = [
    "ActorThreadPool",
    "BatchCall",
    "CallReply",
    "InlineCallActor",
    "ParkedCallActor",
    "PooledThreadingActor",
    "ToolCallActor",
    "ToolCallDispatcher",
    "call_actor_class",
]
