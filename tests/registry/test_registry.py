"""The tool registry: providers, catalog membership as the execution gate, generations, state."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support import handlers as _handlers
from toolvisor.contract import CallContext, Err, Ok, Tool, ToolCall, ToolError
from toolvisor.registry import (
    DynamicToolProvider,
    GenerationMismatchError,
    PreparedCall,
    StaticToolProvider,
    ToolManifest,
    ToolProvider,
    ToolRegistry,
    ToolState,
    UnknownSourceError,
    UnknownToolError,
)
from toolvisor.testing import capture_events


class Recorder:
    """Tools whose handlers record each call, so a test can tell whether a handler ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tool(self, name: str, *, internal: bool = False) -> Tool:
        def handler(arguments: dict[str, Any]) -> Ok:
            self.calls.append(name)
            return Ok(name)

        return Tool(name=name, handler=handler, internal=internal)


def is_not_found(result: object) -> bool:
    return (isinstance(result, Err) and isinstance(result.reason, ToolError)
            and result.reason.reason == "not_found")


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def test_only_members_are_offered_and_run(rec: Recorder) -> None:
    registry = ToolRegistry.from_tools([rec.tool("a"), rec.tool("b"), rec.tool("c")])
    assert [s.name for s in registry.specs()] == ["a", "b", "c"]
    assert registry.remove_member("b")
    assert [s.name for s in registry.specs()] == ["a", "c"]
    assert [m.name for m in registry.catalog()] == ["a", "c"]

    result = registry.execute("b", {}, CallContext(tool_call=ToolCall(id="c1", name="b")))
    assert is_not_found(result)
    assert isinstance(result, Err) and result.reason.tool_call_id == "c1"
    assert "not in the catalog" in result.reason.message
    assert is_not_found(registry.resolve("b"))
    assert is_not_found(registry.prepare("b", {}))
    assert is_not_found(registry.execute("nope", {}))
    assert rec.calls == []

    assert registry.execute("a", {}) == Ok("a")
    assert rec.calls == ["a"]
    resolved = registry.resolve("c")
    assert isinstance(resolved, Tool) and resolved.name == "c"


def test_internal_tools_are_never_offered(rec: Recorder) -> None:
    secret = rec.tool("secret", internal=True)
    registry = ToolRegistry.from_tools([rec.tool("a"), secret])
    assert registry.members() == {"a"}
    assert [s.name for s in registry.specs()] == ["a"]
    with pytest.raises(ValueError, match="internal"):
        registry.add_member("secret")
    assert is_not_found(registry.execute("secret", {}))
    assert rec.calls == []
    assert registry.execute_internal("secret", {}) == Ok("secret")
    assert is_not_found(registry.execute_internal("a", {}))
    assert rec.calls == ["secret"]
    assert registry.state().sources["tools"].tools == ("a", "secret")


def test_generation_moves_only_on_real_change(rec: Recorder) -> None:
    a, b = rec.tool("a"), rec.tool("b")
    registry = ToolRegistry.from_tools([a, b])
    start = registry.generation
    assert not registry.add_member("a")
    assert not registry.remove_member("zzz")
    assert registry.generation == start
    assert registry.remove_member("a")
    assert registry.generation == start + 1
    assert not registry.remove_member("a")
    assert registry.add_member("a")
    assert registry.generation == start + 2
    # Same manifests from a new provider: nothing the model sees changed.
    registry.replace_source("tools", StaticToolProvider([a, b]))
    assert registry.generation == start + 2
    registry.replace_source("tools", StaticToolProvider([a]))
    assert registry.generation == start + 3
    assert registry.members() == {"a"}


def test_dynamic_provider_changes_are_observed(rec: Recorder) -> None:
    dynamic = DynamicToolProvider([rec.tool("d1")])
    registry = ToolRegistry({"dyn": dynamic})
    generation = registry.generation
    d2 = rec.tool("d2")
    assert dynamic.add(d2)
    assert not dynamic.add(d2)
    assert registry.members() == {"d1", "d2"}
    assert registry.generation == generation + 1
    assert registry.execute("d2", {}) == Ok("d2")

    # A version bump that leaves the tool set as it was does not move the generation.
    dynamic.remove("d2")
    dynamic.add(d2)
    assert registry.generation == generation + 1

    dynamic.remove("d1")
    assert registry.members() == {"d2"}
    assert is_not_found(registry.execute("d1", {}))
    assert rec.calls == ["d2"]
    with pytest.raises(ValueError, match="replace=True"):
        dynamic.add(rec.tool("d2"))


def test_tools_a_non_joining_source_gains_stay_out(rec: Recorder) -> None:
    dynamic = DynamicToolProvider([rec.tool("d1")])
    registry = ToolRegistry()
    registry.add_source("dyn", dynamic, join_catalog=False)
    assert registry.members() == frozenset()
    registry.add_member("d1")
    dynamic.add(rec.tool("d2"))
    assert registry.members() == {"d1"}


def test_a_member_removed_by_the_user_is_not_re_added_by_a_source_change(rec: Recorder) -> None:
    dynamic = DynamicToolProvider([rec.tool("d1")])
    registry = ToolRegistry({"dyn": dynamic})
    registry.remove_member("d1")
    dynamic.add(rec.tool("d2"))
    assert registry.members() == {"d2"}


def test_apply_state_is_generation_checked(rec: Recorder) -> None:
    registry = ToolRegistry.from_tools([rec.tool("a"), rec.tool("b")])
    state = ToolState.model_validate_json(registry.state().model_dump_json())
    edited = state.model_copy(update={"sources": {"tools": state.sources["tools"].model_copy(
        update={"members": ("b",)})}})
    registry.apply_state(edited)
    assert registry.members() == {"b"}
    assert registry.generation == state.generation + 1

    with pytest.raises(GenerationMismatchError, match="generation 1 but the registry is at "
                                                      "generation 2") as caught:
        registry.apply_state(state)
    assert (caught.value.expected, caught.value.given) == (2, 1)
    assert registry.members() == {"b"}

    fresh = registry.state()
    bad = fresh.model_copy(update={"sources": {"tools": fresh.sources["tools"].model_copy(
        update={"members": ("zzz",)})}})
    with pytest.raises(ValueError, match="offers no such tool"):
        registry.apply_state(bad)
    with pytest.raises(ValueError, match="lists sources"):
        registry.apply_state(fresh.model_copy(update={"sources": {}}))
    with pytest.raises(TypeError, match="ToolState"):
        registry.apply_state({"generation": 2})  # type: ignore[arg-type]


def test_restore_keeps_orphans_and_rebinds_them(rec: Recorder) -> None:
    a, b, c = rec.tool("a"), rec.tool("b"), rec.tool("c")
    original = ToolRegistry({"left": StaticToolProvider([a, b]),
                             "right": StaticToolProvider([c])})
    original.remove_member("b")
    snapshot_json = original.state().model_dump_json()

    # Another session, where only "right" is available yet.
    restored = ToolRegistry({"right": StaticToolProvider([c])})
    restored.remove_member("c")
    report = restored.restore_state(ToolState.model_validate_json(snapshot_json))
    assert report.members == ("c",)
    assert report.orphans == {"left": ("a",)}
    assert report.dropped == {}
    assert restored.orphans() == {"left": ("a",)}
    assert restored.members() == {"c"}
    assert is_not_found(restored.execute("a", {}))
    with pytest.raises(UnknownToolError, match="source 'left', which is missing"):
        restored.add_member("a")
    assert rec.calls == []

    generation = restored.generation
    restored.add_source("left", StaticToolProvider([a, b]))
    # Re-bound exactly as the snapshot had it: "a" a member, "b" not.
    assert restored.members() == {"a", "c"}
    assert restored.orphans() == {}
    assert restored.generation == generation + 1
    assert restored.execute("a", {}) == Ok("a")


def test_restore_reports_members_a_live_source_no_longer_has(rec: Recorder) -> None:
    a, b, c = rec.tool("a"), rec.tool("b"), rec.tool("c")
    registry = ToolRegistry.from_tools([a, b])
    snapshot = registry.state()
    registry.replace_source("tools", StaticToolProvider([a, c]))
    report = registry.restore_state(snapshot)
    # "c" is new since the snapshot, so it joins like any new tool of a joining source.
    assert registry.members() == {"a", "c"}
    assert report.dropped == {"tools": ("b",)}


def test_an_orphan_its_source_no_longer_provides_is_dropped(rec: Recorder) -> None:
    a, b = rec.tool("a"), rec.tool("b")
    registry = ToolRegistry.from_tools([a, b])
    snapshot = registry.state()
    registry.remove_source("tools")
    registry.restore_state(snapshot)
    assert registry.orphans() == {"tools": ("a", "b")}
    with capture_events() as events:
        registry.add_source("tools", StaticToolProvider([a]))
    assert registry.members() == {"a"}
    rebound = [e for e in events if e["event"] == "orphans_rebound"]
    assert rebound and rebound[0]["dropped"] == ["b"]


def test_prepare_binds_the_call_and_keeps_the_given_context(rec: Recorder) -> None:
    registry = ToolRegistry.from_tools([rec.tool("a")])
    prepared = registry.prepare("a", {"x": 1})
    assert isinstance(prepared, PreparedCall)
    assert prepared.tool.name == "a" and prepared.arguments == {"x": 1}
    given = CallContext(session_id="s")
    kept = registry.prepare("a", {}, given)
    assert isinstance(kept, PreparedCall) and kept.ctx is given


def test_available_lists_every_tool_of_the_live_sources_members_or_not(rec: Recorder) -> None:
    registry = ToolRegistry.from_tools([rec.tool("a"), rec.tool("b")])
    registry.remove_member("b")
    assert [m.name for m in registry.available()] == ["a", "b"]
    assert registry.members() == {"a"}


def test_source_errors_are_clear(rec: Recorder) -> None:
    a = rec.tool("a")
    registry = ToolRegistry.from_tools([a])
    with pytest.raises(ValueError, match="already exists; use replace_source"):
        registry.add_source("tools", StaticToolProvider([]))
    with pytest.raises(ValueError, match="'a' is already provided by source 'tools'"):
        registry.add_source("more", StaticToolProvider([rec.tool("a")]))
    with pytest.raises(UnknownSourceError, match="no tool source named 'ghost'"):
        registry.replace_source("ghost", StaticToolProvider([]))
    with pytest.raises(UnknownSourceError, match="no tool source named 'ghost'"):
        registry.remove_source("ghost")
    with pytest.raises(TypeError, match="ToolProvider"):
        registry.add_source("bad", [a])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty str"):
        registry.add_source("", StaticToolProvider([]))
    with pytest.raises(UnknownToolError, match="no live source provides a tool named 'zz'"):
        registry.add_member("zz")
    with pytest.raises(ValueError, match="two tools are named 'a'"):
        StaticToolProvider([a, rec.tool("a")])
    with pytest.raises(TypeError, match="Tool objects"):
        StaticToolProvider(["a"])  # type: ignore[list-item]
    assert registry.sources() == ("tools",)


def test_a_name_a_dynamic_source_gains_later_stays_with_its_first_owner(rec: Recorder) -> None:
    dynamic = DynamicToolProvider()
    registry = ToolRegistry({"static": StaticToolProvider([rec.tool("a")]), "dyn": dynamic})
    with capture_events() as events:
        dynamic.add(rec.tool("a"))
        assert registry.execute("a", {}) == Ok("a")
    assert any(e["event"] == "tool_shadowed" and e["owner"] == "static" for e in events)
    assert registry.state().sources["dyn"].tools == ()


def test_custom_providers_fit_the_protocol(rec: Recorder) -> None:
    class Remote:
        """A provider whose tools live elsewhere: it answers every call itself."""

        version = 0

        def manifests(self) -> tuple[ToolManifest, ...]:
            return (ToolManifest.of(Tool(name="far")),)

        def resolve(self, name: str) -> Tool | None:
            return Tool(name="far") if name == "far" else None

        def prepare(self, name: str, arguments: Any, ctx: CallContext) -> PreparedCall | Err:
            return PreparedCall(Tool(name=name), arguments, ctx)

        def execute(self, call: PreparedCall) -> Ok:
            return Ok({"remote": call.tool.name, "arguments": call.arguments})

    assert isinstance(Remote(), ToolProvider)
    registry = ToolRegistry({"remote": Remote()})
    assert registry.execute("far", {"q": 1}) == Ok({"remote": "far", "arguments": {"q": 1}})


def test_events_name_what_changed(rec: Recorder) -> None:
    with capture_events() as events:
        registry = ToolRegistry.from_tools([rec.tool("a")])
        registry.remove_member("a")
        registry.add_member("a")
        registry.remove_source("tools")
    names = [e["event"] for e in events if e.get("component") == "registry"]
    assert names == ["tool_source_added", "catalog_member_removed", "catalog_member_added",
                     "tool_source_removed"]


def test_concurrent_calls_and_edits(rec: Recorder) -> None:
    dynamic = DynamicToolProvider()
    registry = ToolRegistry({"static": StaticToolProvider([rec.tool("a")]), "dyn": dynamic})
    extra = rec.tool("b")
    start = threading.Barrier(3)
    results: list[object] = []

    def call() -> None:
        start.wait()
        results.extend(registry.execute(name, {}) for _ in range(200) for name in ("a", "b"))

    def edit_membership() -> None:
        start.wait()
        for _ in range(200):
            registry.remove_member("a")
            registry.add_member("a")

    def edit_tools() -> None:
        start.wait()
        for _ in range(200):
            dynamic.add(extra)
            dynamic.remove("b")

    threads = [threading.Thread(target=f) for f in (call, edit_membership, edit_tools)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r in (Ok("a"), Ok("b")) or is_not_found(r) for r in results)
    assert len(results) == 400
    assert registry.members() == {"a"}
    assert rec.calls.count("a") + rec.calls.count("b") == sum(isinstance(r, Ok) for r in results)


class CountingProvider(DynamicToolProvider):
    """A dynamic source that counts how often the registry resolves its tools."""

    def __init__(self, tools: list[Tool]) -> None:
        super().__init__(tools)
        self.resolved = 0

    def resolve(self, name: str) -> Tool | None:
        self.resolved += 1
        return super().resolve(name)


def test_process_tools_follow_the_catalog_and_are_worked_out_once_per_change() -> None:
    source = CountingProvider([Tool("a", handler=_handlers.ok_echo),
                               Tool("b", handler=_handlers.ok_echo)])
    registry = ToolRegistry({"dyn": source})
    assert [registry.process_tools() for _ in range(3)] == [[], [], []]
    assert source.resolved == 2  # each member resolved once, for all three answers
    source.add(Tool("a", handler=_handlers.pid, isolation="process"), replace=True)
    assert registry.process_tools() == registry.process_tools() == ["a"]
    assert source.resolved == 4
    registry.remove_member("a")
    assert registry.process_tools() == []
    registry.add_member("a")
    assert registry.process_tools() == ["a"]
