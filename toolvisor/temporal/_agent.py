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
from dataclasses import dataclass, field

from toolvisor.contract import AsyncModel, Model, Tool, check_seconds
from toolvisor.machine import (
    DEFAULT_MODEL_POLICY,
    MachineConfig,
    Mode,
    ModelPolicy,
    Policy,
)


@dataclass(frozen=True, eq=False)
class TemporalAgent:
    """An agent whose runs are Temporal workflows and whose tool calls are activities.

    Args:
        name: The agent's name: a run names the agent it is for, and a worker runs the
            agents it was given by name.
        model: The model (``respond`` or ``arespond``), asked in an activity per model call.
        tools: The tools, written as for ``Agent`` (``@function_tool`` with ``timeout``,
            ``isolation``, ``retryable``); each call runs in an activity under a
            ``ToolRunner``.
        system_prompt: The system prompt, if any.
        on_tool_error: The policy for failed tool calls (the only retry authority). It runs
            in the workflow: a function must decide from the call and its error alone (no
            clock, no I/O), as the machine does, or the run's history no longer replays.
        tool_policies: Per-tool policies by tool name (each runs in the workflow too).
        mode: ``sequential``, ``parallel_batch_approval`` or ``parallel_streaming``.
        max_turns: The most model calls a run makes.
        max_call_attempts: The most runs of one call, whatever a policy says.
        on_model_error: The policy for failed model calls (the only retry authority; it
            runs in the workflow too).
        max_model_attempts: The most tries of one turn's model call.
        model_timeout: Seconds one model call may take.
        tool_timeout: Seconds a tool call may take when its tool names no ``timeout``.
        timeout_grace: Seconds added to a call's timeout for its activity's
            ``start_to_close``: the runner stops the call first, so Temporal's timeout only
            fires for a worker that was lost.
        heartbeat_timeout: Seconds without a heartbeat after which Temporal takes a model
            or tool call's worker as lost (the activity heartbeats several times within it).
    """

    name: str
    model: Model | AsyncModel
    tools: Sequence[Tool] = ()
    system_prompt: str | None = None
    on_tool_error: Policy = "continue"
    tool_policies: Mapping[str, Policy] = field(default_factory=dict)
    mode: Mode = "parallel_batch_approval"
    max_turns: int = 8
    max_call_attempts: int = 10
    on_model_error: ModelPolicy = DEFAULT_MODEL_POLICY
    max_model_attempts: int = 10
    model_timeout: float = 60.0
    tool_timeout: float = 30.0
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
        for name in ("model_timeout", "tool_timeout", "heartbeat_timeout"):
            check_seconds(f"TemporalAgent.{name}", getattr(self, name), positive=True)
        check_seconds("TemporalAgent.timeout_grace", self.timeout_grace)
        config = MachineConfig(
            tools=tuple(self.tools), system_prompt=self.system_prompt,
            on_tool_error=self.on_tool_error, tool_policies=self.tool_policies, mode=self.mode,
            max_turns=self.max_turns, max_call_attempts=self.max_call_attempts,
            on_model_error=self.on_model_error, max_model_attempts=self.max_model_attempts)
        timed = {t.name: t if t.timeout is not None
                 else dataclasses.replace(t, timeout=self.tool_timeout) for t in config.tools}
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
        """The tool ``name`` with its timeout set (the tool's own, else ``tool_timeout``).

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
        return self.tool_timeout if tool is None or tool.timeout is None else tool.timeout

    @property
    def fingerprint(self) -> str:
        """A digest of what the workflow reads of the agent (tool specs, prompt, mode,
        bounds): a run started by a client whose agent differs from the worker's is refused."""
        shape = {"tools": [spec.model_dump(mode="json") for spec in self._config.tool_specs],
                 "system_prompt": self.system_prompt, "mode": self.mode,
                 "max_turns": self.max_turns, "max_call_attempts": self.max_call_attempts,
                 "max_model_attempts": self.max_model_attempts,
                 "retryable": sorted(t.name for t in self.tools if t.retryable)}
        text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]
