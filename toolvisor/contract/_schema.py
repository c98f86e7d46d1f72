"""Checking a tool's input schema when the ``Tool`` is built, so that no call can trip on it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

if TYPE_CHECKING:
    from referencing._core import Resolver  # not re-exported by referencing

_REF_KEYWORDS = ("$ref", "$dynamicRef")


def check_input_schema(schema: Any, tool_name: str) -> None:
    """Raise unless ``schema`` is a valid Draft 2020-12 object schema whose refs all resolve.

    Refs resolve against the schema itself (``$defs``, ``$id``, ``$anchor``) and are never
    fetched: a ref that points elsewhere would fail on the first call instead of here.
    """
    if not isinstance(schema, Mapping):
        raise TypeError(f"tool {tool_name!r}: input_schema must be a JSON schema object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"tool {tool_name!r}: input_schema is not a valid JSON schema "
                         f"(Draft 2020-12): {exc.message}") from exc
    if schema.get("type", "object") != "object":
        raise ValueError(
            f"tool {tool_name!r}: input_schema must describe an object (\"type\": "
            f"\"object\"), got type {schema.get('type')!r}"
        )
    dangling = list(dict.fromkeys(_unresolvable_refs(schema)))
    if dangling:
        raise ValueError(
            f"tool {tool_name!r}: input_schema has {len(dangling)} $ref(s) that resolve to "
            f"nothing: {', '.join(map(repr, dangling))}; a ref must point into the schema "
            "itself ($defs, $id, $anchor): nothing is fetched"
        )


def _unresolvable_refs(schema: Mapping[str, Any]) -> Iterator[str]:
    """Every ``$ref`` / ``$dynamicRef`` of ``schema`` (and its subschemas) that cannot be
    resolved within it, in document order."""
    root = DRAFT202012.create_resource(schema)
    yield from _walk(Registry().resolver_with_root(root), schema)


def _walk(resolver: Resolver[Any], node: Any) -> Iterator[str]:
    resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
    if isinstance(node, Mapping):
        for keyword in _REF_KEYWORDS:
            ref = node.get(keyword)
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    yield ref
    for subschema in DRAFT202012.subresources_of(node):
        yield from _walk(resolver, subschema)
