"""``CallJournal``: adapter calls recorded in a run store by their ``tool_call_id``.

A framework that re-runs a step (LangGraph re-runs an interrupted node from its start) asks
again for calls that already ran: a finished call (``Ok`` or ``Err``) recorded here is
replayed from its record instead of running twice. A call that returned ``Pending`` parks its
completion key; :meth:`CallJournal.settled` reads how the key was resolved (or expires it at
its deadline) and records that result under the call's id. What is stored is JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolvisor.contract import AskUser, Err, HandlerResult, Ok, Pending, ToolError
from toolvisor.durable import CompletionKeyIssuer, RunStore

RESULT_STEP = "toolvisor.adapter.result"
"""The journal step under which an adapter call's result is recorded."""
WAITING_STEP = "toolvisor.adapter.waiting"
"""The journal step under which a call that asked or returned ``Pending`` is recorded."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """A call as the journal holds it: finished, or waiting (with its completion key).
    ``resumes``: how many of the framework's resume values a finished call took (its answers,
    wrong ones included, or the resumes it waited through), for a replay to take as many."""

    result: HandlerResult
    text: str
    completion_key: str | None = None
    resumes: int = 0


class CallJournal:
    """The calls of one run (``run_id``) in ``store``. Thread-safe as the store is."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"run_id must be a non-empty str naming the adapter's run in the "
                             f"store, got {run_id!r}")
        self.store = store
        self.run_id = run_id
        if store.get_run(run_id) is None:
            store.create_run(run_id)

    def issuer(self, tool_call_id: str) -> CompletionKeyIssuer:
        """The completion key of the call ``tool_call_id``, for its ``CallContext``."""
        return CompletionKeyIssuer(self.store, self.run_id, tool_call_id)

    def replay(self, tool_call_id: str) -> Recorded | None:
        """The call as recorded: its result, else what it waits for; ``None`` if it never
        ran to either."""
        record = self.store.journal_record(self.run_id, tool_call_id, RESULT_STEP) \
            or self.store.journal_record(self.run_id, tool_call_id, WAITING_STEP)
        if record is None:
            return None
        data = json.loads(record.output)
        kind, value = data["kind"], data["value"]
        if kind == "ask_user":
            return Recorded(AskUser(**value), data["text"])
        if kind == "pending":
            key = value.pop("completion_key")
            return Recorded(Pending(**value), data["text"], key)
        return Recorded(Ok(value) if kind == "ok" else Err(_error_from_json(value)),
                        data["text"], resumes=data.get("resumes", 0))

    def record_waiting(self, tool_call_id: str, tool_name: str, arguments: Any,
                       result: AskUser | Pending, text: str, *, key: str | None = None
                       ) -> None:
        """Record a call that asked a question or waits on ``key``: replayed as such until
        its result is recorded."""
        if isinstance(result, AskUser):
            kind = "ask_user"
            value: dict[str, Any] = {"question": result.question, "options": result.options,
                                     "expires_in": result.expires_in,
                                     "default": result.default}
        else:
            kind = "pending"
            value = {"completion_key": key, "deadline": result.deadline,
                     "on_timeout": result.on_timeout, "on_cancel": result.on_cancel}
        given = json.dumps({"tool": tool_name, "arguments": arguments}, sort_keys=True,
                           default=repr)
        self.store.record_step(self.run_id, tool_call_id, WAITING_STEP, given,
                               json.dumps({"kind": kind, "value": value, "text": text}))

    def record(self, tool_call_id: str, tool_name: str, arguments: Any,
               result: HandlerResult, text: str, *, resumes: int = 0) -> bool:
        """Record a finished call, which took ``resumes`` resume values; ``False`` (nothing
        recorded) if its result is no JSON or the call has not finished (``AskUser``,
        ``Pending``, ``Halt``)."""
        if not isinstance(result, Ok | Err):
            return False
        kind, value = ("ok", result.value) if isinstance(result, Ok) \
            else ("err", _error_to_json(result.reason))
        try:
            output = json.dumps({"kind": kind, "value": value, "text": text}
                                | ({"resumes": resumes} if resumes else {}), sort_keys=True)
            given = json.dumps({"tool": tool_name, "arguments": arguments}, sort_keys=True)
        except (TypeError, ValueError):
            return False
        self.store.record_step(self.run_id, tool_call_id, RESULT_STEP, given, output)
        return True

    def park(self, key: str, pending: Pending) -> None:
        """The call waits on ``key`` until ``pending.deadline`` (store clock)."""
        deadline_at = None if pending.deadline is None else self.store.now() + pending.deadline
        self.store.park(key, deadline_at=deadline_at, on_timeout=pending.on_timeout,
                        on_cancel=pending.on_cancel)

    def settled(self, tool_call_id: str, key: str) -> Ok | Err | None:
        """How the wait of call ``tool_call_id`` on ``key`` ended; ``None`` while it waits.
        A wait past its deadline ends now as ``timeout`` (code ``pending_deadline_exceeded``)."""
        resolution = self.store.resolution(key)
        if resolution is None:
            wait = next((w for w in self.store.open_waits(self.run_id) if w.key == key), None)
            if wait is None:
                raise LookupError(
                    f"the key {key[:12]}... names no wait of run {self.run_id!r}: give the "
                    "completion key a call of this adapter returned with Pending")
            if wait.deadline_at is None or self.store.now() < wait.deadline_at:
                return None
            resolution = self.store.expire(key, self.store.now())
        if resolution.kind == "ok":
            result: Ok | Err = Ok(resolution.value)
        elif resolution.kind == "error":
            result = Err(resolution.value)
        elif resolution.kind == "timeout":
            result = Err(ToolError("timeout", "tool error: timeout: the pending call was not "
                                   "resolved before its deadline", tool_call_id=tool_call_id,
                                   code="pending_deadline_exceeded"))
        else:
            result = Err(ToolError("handler_exit", "tool error: handler_exit: the pending call "
                                   "was cancelled", tool_call_id=tool_call_id, code="cancelled"))
        return result


def _error_to_json(reason: Any) -> Any:
    if isinstance(reason, ToolError):
        return {"toolvisor.tool_error": reason.to_dict()}
    return reason


def _error_from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"toolvisor.tool_error"}:
        return ToolError.from_dict(value["toolvisor.tool_error"])
    return value
