"""``TemporalAgent``: what one agent is on Temporal, the same on its client and its workers.

The workflow reads the agent's machine settings (tools by their specs, policies, mode, bounds);
the activity workers read its model and tool handlers. Both look it up by name in the worker's
process (``_registry``), so its policies stay Python callables and nothing but JSON crosses
Temporal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

from toolvisor.agent import Limits, Timeouts
from toolvisor.contract import AsyncModel, CapabilityError, Model, Tool, check_seconds
from toolvisor.machine import (
    DEFAULT_MODEL_POLICY,
    MachineConfig,
    Mode,
    ModelPolicy,
    Policy,
    policies_by_tool,
)

_UNHONOURED_LIMITS = {  # Limits field -> why a run on Temporal cannot keep it yet
    "concurrent_calls": "the Temporal worker's activity slots bound the calls in flight, "
                        "not the agent",
    "process_workers": "the worker's runner owns the process pool "
                       "(AgentWorker(process_workers=...))",
    "session_depth": "child sessions do not work on Temporal yet",
    "child_sessions": "child sessions do not work on Temporal yet",
    "tool_output": "the output budget's projection is not applied on Temporal yet",
    "per_tool": "resilience gates (breaker, bulkhead, rate limit) do not work across "
                "Temporal workers yet",
}
_UNHONOURED_TIMEOUTS = {
    "model_warn_after": "a slow model call is not said to the user on Temporal yet "
                        "(its activity shows as running in Temporal's UI)",
}


def _refuse_unhonoured(given: Limits | Timeouts, why: Mapping[str, str]) -> None:
    """Refuse ``given``'s fields in ``why`` set to anything but their default: a run on
    Temporal never silently ignores a setting."""
    kind = type(given)
    default = kind()
    for name, reason in why.items():
        value = getattr(given, name)
        if value != getattr(default, name):
            raise CapabilityError(
                "setting_unavailable", f"TemporalAgent does not take {kind.__name__}.{name} "
                f"(got {value!r}): {reason}; leave it at its default "
                f"({getattr(default, name)!r}), or run this agent as an Agent")


@dataclass(frozen=True, eq=False)
class TemporalAgent:
    """An agent whose runs are Temporal workflows and whose tool calls are activities.

    It takes ``Agent``'s words for what both have (``on_tool_error``, ``limits``,
    ``timeouts``); a setting a run on Temporal cannot keep yet is refused when it is built
    (``CapabilityError``, code ``setting_unavailable``, naming it), never ignored.

    Args:
        name: The agent's name: a run names the agent it is for, and a worker runs the
            agents it was given by name.
        model: The model (``respond`` or ``arespond``), asked in an activity per model call.
        tools: The tools, written as for ``Agent`` (``@function_tool`` with ``timeout``,
            ``isolation``, ``retryable``); each call runs in an activity under a
            ``ToolRunner``.
        system_prompt: The system prompt, if any.
        on_tool_error: What a failed tool call leads to, as for ``Agent``: a policy, or a
            mapping from tool name to policy with ``"*"`` for every other tool (default
            ``"continue"``); a name that is not one of ``tools`` is refused. Policies are the
            only retry authority and run in the workflow: a function must decide from the
            call and its error alone (no clock, no I/O), as the machine does, or the run's
            history no longer replays.
        mode: ``sequential``, ``parallel_batch_approval`` or ``parallel_streaming``.
        on_model_error: The policy for failed model calls (the only retry authority; it
            runs in the workflow too).
        limits: ``Limits.turns``, the most model calls a run makes. Its other fields must
            keep their defaults: Temporal does not honour them yet.
        timeouts: ``Timeouts.tool`` (a tool call's seconds when its tool names no
            ``timeout``) and ``Timeouts.model`` (one model call's seconds);
            ``model_warn_after`` must keep its default.
        max_call_attempts: The most runs of one call, whatever a policy says.
        max_model_attempts: The most tries of one turn's model call.
        timeout_grace: Seconds added to a call's timeout for its activity's
            ``start_to_close``: the runner stops the call first, so Temporal's timeout only
            fires for a worker that was lost.
        heartbeat_timeout: Seconds without a heartbeat after which Temporal takes a model
            or tool call's worker as lost (the activity heartbeats several times within it).

    Raises:
        TypeError: ``limits`` or ``timeouts`` is not a ``Limits`` / ``Timeouts``, or the
            model has neither ``respond`` nor ``arespond``.
        ValueError: A setting out of range, naming it (``on_tool_error`` naming an unknown
            tool).
        CapabilityError: A ``Limits`` or ``Timeouts`` field Temporal does not honour yet is
            set (code ``setting_unavailable``).
    """

    name: str
    model: Model | AsyncModel
    tools: Sequence[Tool] = ()
    _: KW_ONLY
    system_prompt: str | None = None
    on_tool_error: Policy | Mapping[str, Policy] = "continue"
    mode: Mode = "parallel_batch_approval"
    on_model_error: ModelPolicy = DEFAULT_MODEL_POLICY
    limits: Limits = field(default_factory=Limits)
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_call_attempts: int = 10
    max_model_attempts: int = 10
    timeout_grace: float = 5.0
    heartbeat_timeout: float = 10.0
    _config: MachineConfig = field(init=False, repr=False)
    _by_name: dict[str, Tool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"TemporalAgent.name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.model, Model | AsyncModel):
            raise TypeError(f"TemporalAgent.model must have respond() or arespond(), got "
                            f"{type(self.model).__name__}")
        for setting, kind in (("limits", Limits), ("timeouts", Timeouts)):
            if not isinstance(getattr(self, setting), kind):
                raise TypeError(f"{setting} must be a toolvisor.{kind.__name__} ({setting}="
                                f"{kind.__name__}(...)), got "
                                f"{type(getattr(self, setting)).__name__}")
        _refuse_unhonoured(self.limits, _UNHONOURED_LIMITS)
        _refuse_unhonoured(self.timeouts, _UNHONOURED_TIMEOUTS)
        check_seconds("TemporalAgent.heartbeat_timeout", self.heartbeat_timeout, positive=True)
        check_seconds("TemporalAgent.timeout_grace", self.timeout_grace)
        given = self.tools  # MachineConfig refuses what is not a sequence of Tool
        known = {t.name for t in given if isinstance(t, Tool)} \
            if isinstance(given, Sequence) else set()
        default_policy, policies = policies_by_tool(self.on_tool_error, known)
        config = MachineConfig(
            tools=given, system_prompt=self.system_prompt, on_tool_error=default_policy,
            tool_policies=policies, mode=self.mode, max_turns=self.limits.turns,
            max_call_attempts=self.max_call_attempts, on_model_error=self.on_model_error,
            max_model_attempts=self.max_model_attempts)
        timed = {t.name: t if t.timeout is not None
                 else dataclasses.replace(t, timeout=self.timeouts.tool) for t in config.tools}
        object.__setattr__(self, "tools", config.tools)
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_by_name", timed)

    def machine_config(self, seed: int) -> MachineConfig:
        """The run's ``MachineConfig``, with the run's retry jitter ``seed``.

        Args:
            seed: The seed of the run's retry jitter (drawn once by the workflow).
        """
        return dataclasses.replace(self._config, seed=seed)

    def tool(self, name: str) -> Tool | None:
        """The tool ``name`` with its timeout set (the tool's own, else ``Timeouts.tool``).

        Args:
            name: The tool's name.
        """
        return self._by_name.get(name)

    def call_timeout(self, name: str) -> float:
        """Seconds a call of tool ``name`` may take before the runner stops it.

        Args:
            name: The tool's name.
        """
        tool = self._by_name.get(name)
        return self.timeouts.tool if tool is None or tool.timeout is None else tool.timeout

    @property
    def fingerprint(self) -> str:
        """A digest of what the workflow reads of the agent (tool specs, prompt, mode,
        bounds, which tools have a policy of their own): a run started by a client whose
        agent differs from the worker's is refused. Policies themselves are functions, so
        only where they apply is compared."""
        shape = {"tools": [spec.model_dump(mode="json") for spec in self._config.tool_specs],
                 "system_prompt": self.system_prompt, "mode": self.mode,
                 "max_turns": self.limits.turns, "max_call_attempts": self.max_call_attempts,
                 "max_model_attempts": self.max_model_attempts,
                 "retryable": sorted(t.name for t in self.tools if t.retryable),
                 "tool_policies": sorted(self._config.tool_policies)}
        text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]
