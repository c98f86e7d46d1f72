"""``CompletionKeyIssuer``: the completion key of one tool call, taken by its handler."""

from __future__ import annotations

from toolvisor.durable._errors import DurableError
from toolvisor.durable._store import RunStore


class CompletionKeyIssuer:
    """Issues the key that names the durable wait of one call (``ctx.completion_key()``).

    Built per call execution by the host. ``issue()`` returns the same key every time for the
    same run and call, also after a restart, and records it in the store when first issued,
    so a resolver may resolve it at once. ``issued`` tells the executor whether this execution
    took a key: a ``Pending`` result without one is refused.

    Owned by the thread running the call's handler.
    """

    __slots__ = ("_issued", "call_id", "run_id", "store")

    def __init__(self, store: RunStore | None, run_id: str | None, call_id: str | None) -> None:
        self.store = store
        self.run_id = run_id
        self.call_id = call_id
        self._issued: str | None = None

    def issue(self) -> str:
        """The call's signed completion key; hand it to whoever will resolve the call.

        Raises :class:`DurableError` ``completion_keys_unavailable`` without a store or run,
        and ``completion_key_missing_call_id`` outside a prepared call.
        """
        if self._issued is None:
            if self.store is None or self.run_id is None:
                raise DurableError(
                    "completion_keys_unavailable",
                    "this run has no run store, so a call cannot take a completion key; "
                    "give the agent a store (e.g. SqliteRunStore)",
                )
            if self.call_id is None:
                raise DurableError(
                    "completion_key_missing_call_id",
                    "a completion key names the wait of one tool call, and this context has "
                    "no call id; only calls the runtime prepared can take a key",
                )
            self._issued = self.store.issue_key(self.run_id, self.call_id, purpose="call")
        return self._issued

    @property
    def issued(self) -> str | None:
        """The key this execution took with :meth:`issue`, or ``None`` if it took none."""
        return self._issued

    def __repr__(self) -> str:
        return (
            f"CompletionKeyIssuer(run_id={self.run_id!r}, call_id={self.call_id!r}, "
            f"issued={self._issued is not None})"
        )
