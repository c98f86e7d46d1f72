"""pykka actors: ``ToolCallActor`` (one per tool call) and the batch dispatcher."""

from toolvisor.actors._dispatch import BatchCall, ToolCallDispatcher
from toolvisor.actors._pooled import ActorThreadPool, PooledThreadingActor
from toolvisor.actors._tool_call import CallReply, ToolCallActor

__all__ = [
    "ActorThreadPool",
    "BatchCall",
    "CallReply",
    "PooledThreadingActor",
    "ToolCallActor",
    "ToolCallDispatcher",
]
