"""No sequence of registry operations ever lets a non-member run (hypothesis stateful test)."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from toolvisor.contract import Err, Ok, Tool, ToolError
from toolvisor.registry import (
    DynamicToolProvider,
    GenerationMismatchError,
    StaticToolProvider,
    ToolRegistry,
    ToolState,
    UnknownSourceError,
    UnknownToolError,
)

STATIC_NAMES = ("a1", "a2", "a3", "ai")
DYNAMIC_NAMES = ("d1", "d2", "di")
INTERNAL = frozenset({"ai", "di"})
PROBES = (*STATIC_NAMES, *DYNAMIC_NAMES, "zz")
# Static variants; "x" variants clash with "s" on a1 so conflicts are exercised.
VARIANTS = {
    "s": (("a1", "a2", "ai"), ("a1",), ("a2", "ai", "a3")),
    "x": (("a1",), ("a3",)),
}


class RegistryMachine(RuleBasedStateMachine):
    states = Bundle("states")

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.tools = {name: self._tool(name) for name in (*STATIC_NAMES, *DYNAMIC_NAMES)}
        self.dynamic = DynamicToolProvider()
        self.registry = ToolRegistry()
        self.generation = self.registry.generation
        self.key = self._key()

    def _tool(self, name: str) -> Tool:
        def handler(arguments: dict[str, Any]) -> Ok:
            self.calls.append(name)
            return Ok(name)

        return Tool(name=name, handler=handler, internal=name in INTERNAL)

    def _static(self, source: str, variant: int) -> StaticToolProvider:
        names = VARIANTS[source][variant % len(VARIANTS[source])]
        return StaticToolProvider(self.tools[n] for n in names)

    def _key(self) -> Any:
        """What the generation stands for: the sources' tools, the members, the orphans."""
        state = self.registry.state()
        return list(state.sources.items()), sorted(state.orphans.items())

    @initialize()
    def start(self) -> None:
        self.registry.add_source("s", self._static("s", 0))

    @rule(source=st.sampled_from(["s", "x", "d"]), variant=st.integers(0, 2), join=st.booleans())
    def add_source(self, source: str, variant: int, join: bool) -> None:
        provider = self.dynamic if source == "d" else self._static(source, variant)
        waiting = self.registry.orphans().get(source, ())
        try:
            self.registry.add_source(source, provider, join_catalog=join)
        except ValueError as exc:
            assert source in self.registry.sources() or "already provided" in str(exc)
        else:
            # The orphans it still provides are re-bound as members.
            offered = {m.name for m in provider.manifests()}
            assert {t for t in waiting if t in offered} <= self.registry.members()
            assert source not in self.registry.orphans()

    @rule(source=st.sampled_from(["s", "x"]), variant=st.integers(0, 2))
    def replace_source(self, source: str, variant: int) -> None:
        try:
            self.registry.replace_source(source, self._static(source, variant))
        except UnknownSourceError:
            assert source not in self.registry.sources()
        except ValueError as exc:
            assert "already provided" in str(exc)

    @rule(source=st.sampled_from(["s", "x", "d"]))
    def remove_source(self, source: str) -> None:
        try:
            self.registry.remove_source(source)
        except UnknownSourceError:
            assert source not in self.registry.sources()

    @rule(name=st.sampled_from(DYNAMIC_NAMES))
    def dynamic_add(self, name: str) -> None:
        self.dynamic.add(self.tools[name], replace=True)

    @rule(name=st.sampled_from(DYNAMIC_NAMES))
    def dynamic_remove(self, name: str) -> None:
        self.dynamic.remove(name)

    @rule(name=st.sampled_from(PROBES))
    def add_member(self, name: str) -> None:
        try:
            self.registry.add_member(name)
        except UnknownToolError:
            live = self.registry.state().sources.values()
            assert all(name not in known.tools for known in live)
        except ValueError:
            assert name in INTERNAL

    @rule(name=st.sampled_from(PROBES))
    def remove_member(self, name: str) -> None:
        self.registry.remove_member(name)
        assert name not in self.registry.members()

    @rule(target=states)
    def take_state(self) -> ToolState:
        return ToolState.model_validate_json(self.registry.state().model_dump_json())

    @rule(state=states, drop=st.sampled_from(PROBES))
    def apply_state(self, state: ToolState, drop: str) -> None:
        edited = state.model_copy(update={"sources": {
            name: known.model_copy(update={"members": tuple(m for m in known.members
                                                            if m != drop)})
            for name, known in state.sources.items()
        }})
        generation = self.registry.generation
        try:
            self.registry.apply_state(edited)
        except GenerationMismatchError:
            assert state.generation != generation
        else:
            assert state.generation == generation

    @rule(state=consumes(states))
    def restore_state(self, state: ToolState) -> None:
        live = set(self.registry.sources())
        report = self.registry.restore_state(state)
        assert set(report.members) == self.registry.members()
        known = {**state.orphans, **state.sources}
        expected = {name: k.members for name, k in known.items() if name not in live}
        assert report.orphans == expected == self.registry.orphans()

    @invariant()
    def only_members_run(self) -> None:
        members = self.registry.members()
        for name in PROBES:
            before = len(self.calls)
            result = self.registry.execute(name, {})
            ran = self.calls[before:]
            if name in members:
                assert result == Ok(name) and ran == [name]
            else:
                assert isinstance(result, Err) and isinstance(result.reason, ToolError)
                assert result.reason.reason == "not_found"
                assert ran == []

    @invariant()
    def catalog_is_consistent(self) -> None:
        members = self.registry.members()
        assert not members & INTERNAL
        assert {s.name for s in self.registry.specs()} == members
        state = self.registry.state()
        assert state.members() == members
        assert not set(state.sources) & set(state.orphans)

    @invariant()
    def generation_moves_exactly_on_change(self) -> None:
        generation, key = self.registry.generation, self._key()
        if key == self.key:
            assert generation == self.generation
        else:
            assert generation == self.generation + 1
        self.generation, self.key = generation, key


RegistryMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
TestRegistryMachine = RegistryMachine.TestCase
