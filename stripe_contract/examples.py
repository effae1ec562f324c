"""The smallest object the checker accepts for a resource, built from the SDK's class and the
fixture's field list alone: what a test mutates to show that each kind of violation is caught."""

from __future__ import annotations

from typing import Any

from stripe_contract.known import INCLUDABLE
from stripe_contract.objects import fixture_fields
from stripe_contract.types import (
    NULL,
    Collection,
    DictOf,
    Enum,
    ListOf,
    Node,
    OneOf,
    Scalar,
    Struct,
    resource_struct,
)

_SCALARS: dict[str, Any] = {
    "str": "x",
    "int": 1,
    "float": 1.5,
    "bool": False,
    "any": None,
    "null": None,
    "empty": "",
}


def example(object_name: str) -> dict[str, Any]:
    """A conforming `object_name` (e.g. "refund"): its non-Optional fields and its fixture's
    fields, each the simplest value of its type (null where it may be), `id` a plausible one."""
    struct = resource_struct(object_name)
    if struct is None:
        raise KeyError(f"no SDK class for object {object_name!r}")
    obj = _struct(struct, depth=0)
    if "id" in obj:
        obj["id"] = f"{object_name.split('.')[-1][:4]}_example"
    return obj


def _struct(struct: Struct, depth: int) -> dict[str, Any]:
    wanted = fixture_fields().get(struct.object_name or "", frozenset())
    return {
        name: _value(field.node, depth + 1)
        for name, field in struct.fields.items()
        if (field.required or name in wanted) and (struct.object_name, name) not in INCLUDABLE
    }


def _value(node: Node, depth: int) -> Any:
    if isinstance(node, Scalar):
        return _SCALARS[node.kind]
    if isinstance(node, Enum):
        return min(node.values, key=str)
    if isinstance(node, OneOf):
        return None if NULL in node.options else _value(node.options[0], depth)
    if isinstance(node, ListOf):
        return []
    if isinstance(node, DictOf):
        return {}
    if isinstance(node, Collection):
        page: dict[str, Any] = {"object": node.object, "data": [], "has_more": False}
        page.update({"url": "/v1/example"} if node.object == "list" else {})
        if node.object == "search_result":
            page.update({"url": "/v1/example/search", "next_page": None})
        return page
    if depth > 12:  # pragma: no cover - the SDK's required fields never recurse this deep
        raise RecursionError(f"{node.name} nests too deep for an example")
    return _struct(node, depth)
