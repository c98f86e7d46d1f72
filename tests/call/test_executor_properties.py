"""Properties of ``execute`` for any handler behaviour (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolvisor import AskUser, CallContext, Err, Halt, Ok, Pending, Tool, ToolError
from toolvisor.call import execute
from toolvisor.contract import LEGAL_RESULT_TYPES

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)
legal_results = st.one_of(
    st.builds(Ok, json_values),
    st.builds(Err, json_values),
    st.builds(AskUser, st.text(),  # options: none (a free answer), or at least one
              st.none() | st.lists(st.text(), min_size=1, max_size=3, unique=True).map(tuple)),
    st.builds(Halt, st.text(min_size=1), json_values),
    st.builds(Pending, st.none() | st.floats(min_value=0.001, max_value=1e6)),
)
raised = st.sampled_from([ValueError("v"), RuntimeError("r"), KeyError("k"), SystemExit(2),
                          SystemExit(None), KeyboardInterrupt(), GeneratorExit(),
                          ZeroDivisionError()])
garbage = st.one_of(json_values, st.just(object()), st.just(Ok), st.just(Exception("as value")))
behaviours = st.one_of(
    legal_results.map(lambda r: ("return", r)),
    raised.map(lambda e: ("raise", e)),
    garbage.map(lambda g: ("return", g)),
)

EXPECTED_REASON = {True: "handler_raised", False: "handler_exit"}


class TakenKey:
    """A completion-key capability whose key was taken, so ``Pending`` is legal."""

    issued = "key"

    def issue(self) -> str:
        return self.issued


KEYED = CallContext(completion_keys=TakenKey())


@settings(max_examples=200, deadline=None)
@given(behaviour=behaviours, arity=st.sampled_from([1, 2]))
def test_execute_returns_exactly_one_legal_result_and_raises_nothing(
    behaviour: tuple[str, Any], arity: int
) -> None:
    kind, value = behaviour

    def act() -> Any:
        if kind == "raise":
            raise value
        return value

    handler = (lambda arguments: act()) if arity == 1 else (lambda arguments, ctx: act())
    result = execute(Tool(name="generated", handler=handler), {}, KEYED)
    assert isinstance(result, LEGAL_RESULT_TYPES)
    if kind == "raise":
        assert isinstance(result, Err) and isinstance(result.reason, ToolError)
        assert result.reason.reason == EXPECTED_REASON[isinstance(value, Exception)]
    elif isinstance(value, LEGAL_RESULT_TYPES):
        assert result is value
    else:
        assert isinstance(result, Err) and isinstance(result.reason, ToolError)
        assert result.reason.reason == "invalid_return" and result.reason.cause is value


SCHEMA = {
    "type": "object",
    "required": ["name", "count"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
argument_objects = st.dictionaries(
    st.sampled_from(["name", "count", "tags", "other"]),
    st.one_of(json_values, st.lists(st.text(), max_size=2)),
    max_size=4,
)


def conforms(arguments: dict[str, Any]) -> bool:
    if set(arguments) - {"name", "count", "tags"} or not {"name", "count"} <= set(arguments):
        return False
    name, count = arguments["name"], arguments["count"]
    tags = arguments.get("tags", [])
    return (isinstance(name, str) and len(name) >= 1
            and isinstance(count, int) and not isinstance(count, bool) and count >= 0
            and isinstance(tags, list) and all(isinstance(t, str) for t in tags))


@settings(max_examples=300, deadline=None)
@given(arguments=st.one_of(argument_objects, json_values))
def test_no_schema_invalid_argument_object_ever_reaches_a_handler(arguments: Any) -> None:
    reached: list[Any] = []

    def handler(received: Any) -> Ok:
        reached.append(received)
        return Ok(None)

    result = execute(Tool(name="strict", input_schema=SCHEMA, handler=handler), arguments)
    valid = isinstance(arguments, dict) and conforms(arguments)
    assert reached == ([arguments] if valid else [])
    assert (result == Ok(None)) is valid
