"""``DurableEffects``: journaled steps, external events and process events of one call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from toolvisor.contract import NEVER_CANCELLED, CancelToken, check_seconds
from toolvisor.durable import _json
from toolvisor.durable._errors import DurableError
from toolvisor.durable._records import JournalRecord, Resolution
from toolvisor.durable._store import RunStore, StoreUnavailableError

_CANCEL_CHECK_INTERVAL = 0.05  # seconds between looks at the cancel token while awaiting
_RECORD_RETRY = 0.1  # seconds between tries of a journal record while the store is away
RECORD_FOR: Final = 60.0
"""How long (seconds) a journaled step whose side effect happened tries to record it while the
store cannot be reached, before the call fails with ``StoreUnavailableError``."""


class DurableEffects:
    """What ``ctx.durable_effects()`` gives a handler: effects that survive a restart.

    Built by the host per call execution from the store, the run id and the call id, and the
    fencing token of the host's lease on the run (``fence``), which every write carries: once
    another host has taken the run over, they raise ``StaleLeaseError``. A replay
    of the call (same run id and call id, e.g. after a crash) gets the journaled results back
    instead of running the effects again. Without a store every method raises
    :class:`DurableError` ``durable_effects_unavailable``; without a call id,
    ``durable_effects_missing_call_id``.

    Owned by the thread running the call's handler (not safe to share across threads).
    """

    def __init__(
        self,
        store: RunStore | None,
        run_id: str | None,
        call_id: str | None,
        *,
        cancelled: CancelToken = NEVER_CANCELLED,
        fence: int | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.call_id = call_id
        self._cancelled = cancelled
        self.fence = fence
        self._steps_seen: set[str] = set()
        self._event_keys: set[str] = set()
        self._events_emitted = 0

    def _target(self) -> tuple[RunStore, str, str]:
        if self.store is None or self.run_id is None:
            raise DurableError(
                "durable_effects_unavailable",
                "this run has no run store, so effects cannot be journaled; give the "
                "agent a store (e.g. SqliteRunStore)",
            )
        if self.call_id is None:
            raise DurableError(
                "durable_effects_missing_call_id",
                "durable effects are journaled per tool call, and this context has no call id; "
                "use them only inside a call the runtime prepared",
            )
        return self.store, self.run_id, self.call_id

    def run_json(self, step_id: str, input: Any, fn: Callable[[Any], Any]) -> Any:
        """``fn(input)``, run once per call and journaled; a replay returns the record instead.

        ``step_id`` names the step within the call: non-empty and used once per execution
        (checked before ``fn`` runs). The record is identified by the step id AND the input:
        a replay with a different input raises ``durable_effect_replay_mismatch``. The result
        must be JSON; it is returned as read back from JSON (a tuple comes back as a list),
        the same on the first run and on replay. If ``fn`` raises, nothing is recorded. If the
        store cannot be reached when the result is to be recorded, the record is tried again
        for up to :data:`RECORD_FOR` seconds (60), so an outage does not have ``fn`` run twice.
        """
        store, run_id, call_id = self._target()
        if not isinstance(step_id, str) or not step_id:
            raise DurableError(
                "durable_effect_empty_step_id",
                f"run_json needs a non-empty str step id, got {step_id!r}",
            )
        if step_id in self._steps_seen:
            raise DurableError(
                "durable_effect_repeated_step_id",
                f"step id {step_id!r} was already used in this execution of the call; give "
                "every step its own id",
            )
        self._steps_seen.add(step_id)
        input_text = self._json(input, f"the input of step {step_id!r}")
        record = store.journal_record(run_id, call_id, step_id)
        if record is None:
            output_text = self._json(fn(input), f"the result of step {step_id!r}")
            record = self._record(store, (run_id, call_id, step_id), input_text, output_text)
        if record.input != input_text:
            raise DurableError(
                "durable_effect_replay_mismatch",
                f"step {step_id!r} was journaled with input {record.input} but is now run with "
                f"{input_text}; a replay must repeat its steps with the same input, or use a "
                "new step id",
            )
        return _json.loads(record.output)

    def _record(self, store: RunStore, step: tuple[str, str, str], input_text: str,
                output_text: str) -> JournalRecord:
        """Journal ``step`` (run id, call id, step id), whose side effect has happened: while the
        store cannot be reached, try again (the write is idempotent, and fenced) for up to
        ``RECORD_FOR`` seconds or until the call is cancelled, since a record that never lands
        has the step run again when the run resumes."""
        deadline = time.monotonic() + RECORD_FOR
        while True:
            try:
                return store.record_step(*step, input_text, output_text, fence=self.fence)
            except StoreUnavailableError:
                if time.monotonic() >= deadline or self._cancelled.wait(_RECORD_RETRY):
                    raise

    @staticmethod
    def _json(value: Any, what: str) -> str:
        try:
            return _json.dumps(value, what)
        except TypeError as exc:
            raise DurableError("durable_effect_not_json", str(exc)) from exc

    def external_event_key(self, name: str) -> str:
        """A signed key an outside party resolves (with the whole key) to deliver event ``name``.

        The same name gives the same key in every execution of the call.
        """
        store, run_id, call_id = self._target()
        if not isinstance(name, str) or not name:
            raise ValueError(f"an external event needs a non-empty str name, got {name!r}")
        key = store.issue_key(run_id, call_id, purpose="event", name=name)
        self._event_keys.add(key)
        return key

    def await_event_json(self, key: str, timeout: float | None = None) -> Any:
        """Block until the event of ``key`` is delivered and return its JSON value.

        ``timeout`` is in seconds of the store's clock from the first await of this key
        (a replay does not restart it). Raises :class:`DurableError`:
        ``durable_effect_event_error`` (the resolver sent ``error=``; ``detail`` is its value),
        ``durable_effect_event_timeout``, or ``durable_effect_event_cancelled`` (the run was
        cancelled, or the call's cancel token was set).
        """
        store, _, _ = self._target()
        if key not in self._event_keys:
            raise DurableError(
                "durable_effect_unknown_event_key",
                "await_event_json takes a key this call made with external_event_key",
            )
        check_seconds("timeout", timeout, positive=True, optional=True)
        deadline_at = None if timeout is None else store.now() + timeout
        wait = store.park(key, deadline_at=deadline_at)
        resolution = wait.resolution
        while resolution is None:
            if self._cancelled.is_set():
                raise DurableError(
                    "durable_effect_event_cancelled", "the call was cancelled while awaiting"
                )
            pause = _CANCEL_CHECK_INTERVAL
            if wait.deadline_at is not None:
                left = wait.deadline_at - store.now()
                if left <= 0:
                    resolution = store.expire(key, store.now(), fence=self.fence)
                    break
                pause = min(pause, left)
            resolution = store.wait_for(key, pause)
        return _delivered(resolution)

    def emit_process_event(self, type: str, payload: Any = None) -> int:
        """Append ``(type, payload)`` to the run's ordered process events; return its ``seq``.

        The n-th event of an execution is recorded once: a replay that emits it again gets
        the original ``seq`` back; emitting something else in its place raises
        ``durable_effect_replay_mismatch``.
        """
        store, run_id, call_id = self._target()
        if not isinstance(type, str) or not type:
            raise ValueError(f"a process event needs a non-empty str type, got {type!r}")
        text = self._json(payload, f"the payload of process event {type!r}")
        record = store.append_process_event(run_id, call_id, self._events_emitted, type,
                                            payload, fence=self.fence)
        if record.type != type or _json.dumps(record.payload, "payload") != text:
            raise DurableError(
                "durable_effect_replay_mismatch",
                f"process event {self._events_emitted} of this call was recorded as "
                f"{record.type!r} {_json.dumps(record.payload, 'payload')} but is now emitted "
                f"as {type!r} {text}; a replay must emit the same events in the same order",
            )
        self._events_emitted += 1
        return record.seq


def _delivered(resolution: Resolution) -> Any:
    if resolution.kind == "ok":
        return resolution.value
    if resolution.kind == "error":
        raise DurableError(
            "durable_effect_event_error",
            f"the external event was resolved with an error: {resolution.value!r}",
            detail=resolution.value,
        )
    if resolution.kind == "timeout":
        raise DurableError(
            "durable_effect_event_timeout", "the external event did not arrive in time"
        )
    raise DurableError("durable_effect_event_cancelled", "the run was cancelled while awaiting")
