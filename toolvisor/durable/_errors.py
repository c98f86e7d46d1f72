"""``DurableError``: why a durable capability refused, as a stable ``code``."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, get_args

from toolvisor.contract import CapabilityError

DurableErrorCode: TypeAlias = Literal[
    "durable_effects_unavailable",
    "durable_effects_missing_call_id",
    "durable_effect_empty_step_id",
    "durable_effect_repeated_step_id",
    "durable_effect_replay_mismatch",
    "durable_effect_not_json",
    "durable_effect_unknown_event_key",
    "durable_effect_event_error",
    "durable_effect_event_timeout",
    "durable_effect_event_cancelled",
    "completion_keys_unavailable",
    "completion_key_missing_call_id",
    "store_required",
]
DURABLE_ERROR_CODES: frozenset[str] = frozenset(get_args(DurableErrorCode))


class DurableError(CapabilityError):
    """A durable capability (completion keys, journal, events) refused or failed.

    ``code`` is one of :data:`DURABLE_ERROR_CODES` and is stable, so callers branch on it
    rather than on the message. ``detail`` carries the JSON value that came with the failure
    (the error an external resolver delivered, say), or ``None``.

    Codes, and what to do about them:

    - ``durable_effects_unavailable`` / ``completion_keys_unavailable``: the run has no session
      store (or no run id); give the agent a store.
    - ``durable_effects_missing_call_id`` / ``completion_key_missing_call_id``: used outside a
      prepared tool call (no call id); only a call the runtime prepared can be journaled.
    - ``durable_effect_empty_step_id`` / ``durable_effect_repeated_step_id``: every
      ``run_json`` step of one execution needs its own non-empty id.
    - ``durable_effect_replay_mismatch``: a replay asked for a journaled step (or emitted a
      process event) with different content than the record; the handler is not
      deterministic in what it journals, or two steps share an id.
    - ``durable_effect_not_json``: a value to journal is not JSON.
    - ``durable_effect_unknown_event_key``: ``await_event_json`` got a key this call did not
      make with ``external_event_key``.
    - ``durable_effect_event_error`` / ``_timeout`` / ``_cancelled``: how an awaited external
      event ended when it did not deliver a value.
    - ``store_required``: a durable run's operation (``submit``, ``resume_run``,
      ``cancel_run``, ``resolve``, ``claim_runs``) on an agent without a run store; give
      the agent one (``Agent(..., store="runs.sqlite")``).
    """

    code: DurableErrorCode
    detail: Any

    def __init__(self, code: DurableErrorCode, message: str, *, detail: Any = None) -> None:
        if code not in DURABLE_ERROR_CODES:
            raise ValueError(
                f"unknown DurableError code {code!r}; expected one of {sorted(DURABLE_ERROR_CODES)}"
            )
        super().__init__(code, message)
        self.detail = detail

    @classmethod
    def needs_store(cls, operation: str) -> DurableError:
        """The error of ``operation`` (``"submit"``, ``"resume_run"``, ...) asked of an agent
        that has no run store: code ``store_required``."""
        return cls("store_required", f"{operation} needs a run store; create the agent "
                   "with Agent(..., store='runs.sqlite') (a SQLite path or a postgresql:// URL)")
