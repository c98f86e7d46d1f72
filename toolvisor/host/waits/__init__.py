"""The durable waits of an agent's runs: completion keys, parked ``Pending`` calls and the
threads that wait for their keys, durable effects, cancel hooks."""

from toolvisor.host.waits._durable_waits import (
    PENDING_TIMEOUT_CODE,
    DurableWaits,
    KeyRelays,
    Ready,
    durable_call_id,
    interrupted_error,
)

__all__ = [
    "PENDING_TIMEOUT_CODE",
    "DurableWaits",
    "KeyRelays",
    "Ready",
    "durable_call_id",
    "interrupted_error",
]
