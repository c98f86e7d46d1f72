"""Durable tool calls: completion keys, the journal of effects and the run stores (SQLite,
PostgreSQL) that keep them."""

from toolvisor.durable._claims import QUEUED
from toolvisor.durable._durability import Durability
from toolvisor.durable._effects import DurableEffects
from toolvisor.durable._errors import DURABLE_ERROR_CODES, DurableError, DurableErrorCode
from toolvisor.durable._failures import StoreError, StoreProblem
from toolvisor.durable._holders import holder_gone, new_holder
from toolvisor.durable._issuer import CompletionKeyIssuer
from toolvisor.durable._open import open_store
from toolvisor.durable._postgres_store import PostgresRunStore
from toolvisor.durable._process_log import (
    ProcessRecord,
    process_records,
    record_end,
    record_restart,
    record_start,
    result_json,
    result_of,
)
from toolvisor.durable._records import (
    JournalRecord,
    KeyPurpose,
    Lease,
    ProcessEvent,
    Resolution,
    ResolutionKind,
    ResolveOutcome,
    RunRecord,
    SavedCheckpoint,
    Wait,
)
from toolvisor.durable._signing import (
    KeyRing,
    SignatureError,
    Signer,
    require_signed,
)
from toolvisor.durable._sql_store import POLL_INTERVAL
from toolvisor.durable._sqlite import SqliteRunStore
from toolvisor.durable._store import (
    UNSET,
    RunStore,
    StaleLeaseError,
    StoreUnavailableError,
    UnknownRunError,
)

__all__ = [
    "DURABLE_ERROR_CODES",
    "POLL_INTERVAL",
    "QUEUED",
    "UNSET",
    "CompletionKeyIssuer",
    "Durability",
    "DurableEffects",
    "DurableError",
    "DurableErrorCode",
    "JournalRecord",
    "KeyPurpose",
    "KeyRing",
    "Lease",
    "PostgresRunStore",
    "ProcessEvent",
    "ProcessRecord",
    "Resolution",
    "ResolutionKind",
    "ResolveOutcome",
    "RunRecord",
    "RunStore",
    "SavedCheckpoint",
    "SignatureError",
    "Signer",
    "SqliteRunStore",
    "StaleLeaseError",
    "StoreError",
    "StoreProblem",
    "StoreUnavailableError",
    "UnknownRunError",
    "Wait",
    "holder_gone",
    "new_holder",
    "open_store",
    "process_records",
    "record_end",
    "record_restart",
    "record_start",
    "require_signed",
    "result_json",
    "result_of",
]
