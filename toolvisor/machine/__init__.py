"""The sans-IO agent loop: ``TurnMachine``, its effects, responses, outcomes and policies."""

from toolvisor.machine._checkpoint import (
    CHECKPOINT_VERSION,
    Checkpoint,
    CheckpointError,
    Mode,
    Suspended,
)
from toolvisor.machine._config import MODES, MachineConfig
from toolvisor.machine._done import Done, Effect, Outcome
from toolvisor.machine._effects import (
    CallToRun,
    EffectId,
    LlmCall,
    LogEvent,
    Progress,
    Sleep,
    ToolCalls,
    WaitingEffect,
)
from toolvisor.machine._machine import TurnMachine
from toolvisor.machine._outcomes import (
    Completed,
    Failed,
    Halted,
    PendingCall,
    Question,
    RunStatus,
    StateConflict,
)
from toolvisor.machine._responses import (
    CallOutcome,
    EffectFailed,
    ModelReplied,
    Response,
    ResponseRefused,
    Slept,
    ToolResults,
)
from toolvisor.machine._settling import RESERVED_HALT_REASONS
from toolvisor.machine._state_view import StateView
from toolvisor.machine.policy import (
    Continue,
    Decision,
    FailedCall,
    HaltRun,
    Policy,
    PolicyFailed,
    RetryAfter,
    RetryPolicy,
    apply_policy,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "MODES",
    "RESERVED_HALT_REASONS",
    "CallOutcome",
    "CallToRun",
    "Checkpoint",
    "CheckpointError",
    "Completed",
    "Continue",
    "Decision",
    "Done",
    "Effect",
    "EffectFailed",
    "EffectId",
    "Failed",
    "FailedCall",
    "HaltRun",
    "Halted",
    "LlmCall",
    "LogEvent",
    "MachineConfig",
    "Mode",
    "ModelReplied",
    "Outcome",
    "PendingCall",
    "Policy",
    "PolicyFailed",
    "Progress",
    "Question",
    "Response",
    "ResponseRefused",
    "RetryAfter",
    "RetryPolicy",
    "RunStatus",
    "Sleep",
    "Slept",
    "StateConflict",
    "StateView",
    "Suspended",
    "ToolCalls",
    "ToolResults",
    "TurnMachine",
    "WaitingEffect",
    "apply_policy",
]
