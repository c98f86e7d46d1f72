"""What a failed model call does to a run: the policy's decision, bounded, and its record.

Plain functions; the machine logs, reports progress and emits the ``Sleep`` or the ending.
"""

from __future__ import annotations

from toolvisor.contract import ModelError
from toolvisor.machine._checkpoint import RunState
from toolvisor.machine._config import MachineConfig
from toolvisor.machine._model_policy import FailRun, ModelDecision, apply_model_policy
from toolvisor.machine._outcomes import ModelErrorInfo
from toolvisor.machine._policy import BrokenPolicy, RetryAfter


def decide_model_failure(config: MachineConfig, run: RunState,
                         error: ModelError) -> tuple[ModelError, ModelDecision]:
    """The error marked with its attempt, and what to do: a retry past ``max_model_attempts``
    is refused whatever the policy said."""
    error = error.with_attempt(run.model_attempt)
    decision = apply_model_policy(config.on_model_error, error, seed=run.seed, turn=run.turns)
    if isinstance(decision, RetryAfter) and run.model_attempt >= config.max_model_attempts:
        decision = FailRun()
    return error, decision


def model_failure(error: ModelError, decision: ModelDecision) -> ModelErrorInfo:
    """The record a ``Failed`` outcome keeps of the last model error."""
    data = error.to_dict()
    return ModelErrorInfo(reason=error.reason, message=error.message, attempts=error.attempt,
                        retry_after=error.retry_after, status=error.status, cause=data["cause"],
                        policy=decision.detail if isinstance(decision, BrokenPolicy) else None)


def failure_text(error: ModelError, decision: ModelDecision) -> str:
    """The ``Failed.error`` line for a run that failed on its model."""
    text = (f"the model call failed ({error.reason}) after {error.attempt} "
            f"attempt{'s' if error.attempt > 1 else ''}: {error.message}")
    if isinstance(decision, BrokenPolicy):
        text += f"; the on_model_error policy failed: {decision.detail}"
    return text
