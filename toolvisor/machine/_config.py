"""``MachineConfig``: the tools, policies, mode and bounds of a run, checked when built."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from toolvisor.contract import Tool, ToolSpec
from toolvisor.machine._checkpoint import Mode
from toolvisor.machine._model_policy import (
    DEFAULT_MODEL_POLICY,
    ModelPolicy,
    check_model_policy,
)
from toolvisor.machine._policy import Policy, check_policy

MODES: frozenset[str] = frozenset(get_args(Mode))
NAMES_SHOWN = 50  # an error lists at most this many tool names


def shown(names: Sequence[str]) -> str:
    """``names`` for an error text, the first ``NAMES_SHOWN`` of them and how many more."""
    more = len(names) - NAMES_SHOWN
    listed = ", ".join(names[:NAMES_SHOWN]) or "(none)"
    return f"{listed}, and {more} more" if more > 0 else listed


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"MachineConfig.{name} must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class MachineConfig:
    """How a ``TurnMachine`` runs.

    ``tools`` are contract ``Tool`` objects (the machine reads names, specs, ``scheduling`` and
    ``retryable``; it never calls handlers). ``on_tool_error`` is the default policy and
    ``tool_policies`` overrides it per tool name. ``mode`` is ``sequential``,
    ``parallel_batch_approval`` (default) or ``parallel_streaming``. ``max_turns`` bounds the
    model calls; ``max_call_attempts`` bounds the runs of one call whatever a policy says.
    ``on_model_error`` decides about failed model calls (default: a ``ModelRetryPolicy``);
    ``max_model_attempts`` bounds one turn's model call tries whatever it says.
    ``seed`` drives retry jitter, so a restored run waits exactly as the original would.
    ``catalog`` looks up tools beyond ``tools`` that come and go at run time (e.g. a
    ``ToolRegistry``'s members); it must be a pure lookup, and the host still gates execution.
    ``catalog_names`` lists the catalog's names now, so a call naming an unknown tool is told
    what there is (else only ``tools`` are named). ``catalog_available`` looks up any tool the
    catalog's sources provide, member or not: a run whose own catalog edits put a tool in
    (``ctx.sessions.set_tool_membership``) may call it (without it, ``catalog`` is asked).
    """

    tools: Sequence[Tool] = ()
    system_prompt: str | None = None
    on_tool_error: Policy = "continue"
    tool_policies: Mapping[str, Policy] = field(default_factory=dict)
    mode: Mode = "parallel_batch_approval"
    max_turns: int = 8
    seed: int = 0
    max_call_attempts: int = 10
    on_model_error: ModelPolicy = DEFAULT_MODEL_POLICY
    max_model_attempts: int = 10
    catalog: Callable[[str], Tool | None] | None = None
    catalog_names: Callable[[], Iterable[str]] | None = None
    catalog_available: Callable[[str], Tool | None] | None = None
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False, default_factory=dict)
    _specs: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if isinstance(self.tools, Tool) or not isinstance(self.tools, Sequence):
            raise TypeError("MachineConfig.tools must be a sequence of Tool")
        tools = tuple(self.tools)
        names: set[str] = set()
        for item in tools:
            if not isinstance(item, Tool):
                raise TypeError(f"MachineConfig.tools must hold Tool objects, "
                                f"got {type(item).__name__}")
            if item.name in names:
                raise ValueError(f"MachineConfig.tools: two tools are named {item.name!r}; "
                                 "tool names must be unique")
            names.add(item.name)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "_by_name", {item.name: item for item in tools})
        object.__setattr__(self, "_specs", tuple(item.spec for item in tools))  # once, not per turn
        if self.catalog is not None and not callable(self.catalog):
            raise TypeError("MachineConfig.catalog must be a function name -> Tool | None")
        if self.catalog_names is not None and not callable(self.catalog_names):
            raise TypeError("MachineConfig.catalog_names must be a function () -> names")
        if self.catalog_available is not None and not callable(self.catalog_available):
            raise TypeError("MachineConfig.catalog_available must be a function "
                            "name -> Tool | None")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError("MachineConfig.system_prompt must be a str or None")
        check_policy(self.on_tool_error, "MachineConfig.on_tool_error")
        if not isinstance(self.tool_policies, Mapping):
            raise TypeError("MachineConfig.tool_policies must map tool names to policies")
        for name, policy in self.tool_policies.items():
            if name not in names and (self.catalog is None or self.catalog(name) is None):
                raise ValueError(f"MachineConfig.tool_policies names unknown tool {name!r}; "
                                 f"known tools: {shown(self.known_tool_names())}")
            check_policy(policy, f"MachineConfig.tool_policies[{name!r}]")
        object.__setattr__(self, "tool_policies", dict(self.tool_policies))
        if self.mode not in MODES:
            raise ValueError(f"MachineConfig.mode must be one of {sorted(MODES)}, "
                             f"got {self.mode!r}")
        _positive_int("max_turns", self.max_turns)
        _positive_int("max_call_attempts", self.max_call_attempts)
        _positive_int("max_model_attempts", self.max_model_attempts)
        check_model_policy(self.on_model_error, "MachineConfig.on_model_error")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"MachineConfig.seed must be an int, got {self.seed!r}")

    def known_tool_names(self, membership: Mapping[str, bool] | None = None) -> list[str]:
        """The names of ``tools`` and of the catalog now (with ``catalog_names``), sorted.

        Args:
            membership: A run's own catalog edits (tool name -> present): the names it put in
                are known, the names it took out are not.
        """
        names = {item.name for item in self.tools}
        if self.catalog_names is not None:
            names.update(self.catalog_names())
        for name, present in (membership or {}).items():
            if not present:
                names.discard(name)
            elif self.tool_named(name, membership) is not None:
                names.add(name)
        return sorted(names)

    def tool_named(self, name: str, membership: Mapping[str, bool] | None = None) -> Tool | None:
        """The tool called ``name``, or ``None`` when neither ``tools`` nor ``catalog`` has it.

        Args:
            name: The tool's name.
            membership: A run's own catalog edits (tool name -> present): a name it took out
                is ``None``; a name it put in is looked up with ``catalog_available``.
        """
        present = None if not membership else membership.get(name)
        if present is False:
            return None
        found = self._by_name.get(name)
        if found is None and present and self.catalog_available is not None:
            found = self.catalog_available(name)
        elif found is None and self.catalog is not None:
            found = self.catalog(name)
        return found

    def policy_for(self, name: str) -> Policy:
        """The policy for failures of tool ``name``: its override or the default."""
        return self.tool_policies.get(name, self.on_tool_error)

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the tools, in configuration order (immutable specs,
        built once with the configuration: every model request shares them)."""
        return self._specs
