"""OTP supervision on pykka: supervised actors, child specs, supervisors, dynamic supervisors."""

from toolvisor.supervisors._dynamic import DynamicSupervisor, DynamicSupervisorRef
from toolvisor.supervisors._errors import (
    ChildRestartingError,
    ChildRunningError,
    ChildSpecError,
    ChildStartError,
    DuplicateChildError,
    TooManyChildrenError,
    UnknownChildError,
)
from toolvisor.supervisors._intensity import Clock
from toolvisor.supervisors._spec import (
    ChildInfo,
    ChildSpec,
    ChildState,
    ChildType,
    Restart,
    Shutdown,
)
from toolvisor.supervisors._supervised import (
    ActorExit,
    ExitReason,
    ShutdownRequest,
    SupervisedActor,
)
from toolvisor.supervisors._supervisor import (
    Strategy,
    Supervisor,
    SupervisorEventHook,
    SupervisorRef,
)

__all__ = [
    "ActorExit",
    "ChildInfo",
    "ChildRestartingError",
    "ChildRunningError",
    "ChildSpec",
    "ChildSpecError",
    "ChildStartError",
    "ChildState",
    "ChildType",
    "Clock",
    "DuplicateChildError",
    "DynamicSupervisor",
    "DynamicSupervisorRef",
    "ExitReason",
    "Restart",
    "Shutdown",
    "ShutdownRequest",
    "Strategy",
    "SupervisedActor",
    "Supervisor",
    "SupervisorEventHook",
    "SupervisorRef",
    "TooManyChildrenError",
    "UnknownChildError",
]
