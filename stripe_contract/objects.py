"""An object Stripe answers (or the sandbox does) against the pinned SDK's resource class.

The class comes from the object's own `object` field (`stripe._object_classes.OBJECT_CLASSES`);
its annotations say which fields exist, which may be absent (only the `Optional` ones), their
types and enum values, at every depth, nested resources (an event's `data.object`, a dispute's
`balance_transactions`, an expanded `latest_charge`) against their own classes. Each resource
must also carry every top-level field of Stripe's published fixture for it
(`fixture_fields.json`, copied from fixtures3.json), except what Stripe includes only when
expanded (known.INCLUDABLE)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection as Container
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from stripe._list_object import ListObject
from stripe._search_result_object import SearchResultObject

from stripe_contract.known import COLLECTION_FIELDS, INCLUDABLE
from stripe_contract.types import (
    ANY,
    INT,
    NULL,
    STR,
    Collection,
    DictOf,
    Enum,
    Field,
    ListOf,
    Node,
    OneOf,
    Scalar,
    Struct,
    compile_hint,
    error_struct,
    hints,
    resource_struct,
)
from stripe_contract.violations import Violation

FIXTURE_FIELDS_FILE = Path(__file__).with_name("fixture_fields.json")
_INDEX = re.compile(r"\[\d+\]")


@dataclass
class ResourceSeen:
    """What the checked objects of one resource showed: how many, which top-level fields (present,
    null or not), and the values of `status` (the states reached)."""

    count: int = 0
    fields: set[str] = field(default_factory=set)
    statuses: set[str] = field(default_factory=set)

    def merge(self, other: ResourceSeen) -> None:
        self.count += other.count
        self.fields |= other.fields
        self.statuses |= other.statuses


@cache
def fixture_fields() -> dict[str, frozenset[str]]:
    data = json.loads(FIXTURE_FIELDS_FILE.read_text())
    return {name: frozenset(keys) for name, keys in data["resources"].items()}


def declared_fields(object_name: str) -> list[str]:
    """The top-level fields the SDK's class for `object_name` declares."""
    struct = resource_struct(object_name)
    return sorted(struct.fields) if struct is not None else []


def type_specific_fields(object_name: str) -> list[str]:
    """Fields named after a value of the class's own `type` enum (PaymentMethod's `card`,
    `sepa_debit`, …): the details of that type, present only on an object of that type."""
    struct = resource_struct(object_name)
    kind = struct.fields.get("type") if struct is not None else None
    if struct is None or kind is None or not isinstance(kind.node, Enum):
        return []
    return sorted(name for name in struct.fields if name in kind.node.values)


@cache
def _collection_fields(kind: str) -> dict[str, Field]:
    cls = ListObject if kind == "list" else SearchResultObject
    fields = {
        name: Field(compile_hint(hint), True) for name, hint in hints(cls).items() if name != "data"
    }
    spelled: dict[str, Node] = {"str": STR, "int": INT, "str|null": OneOf((STR, NULL))}
    for name, (type_name, required) in COLLECTION_FIELDS[kind].items():
        fields[name] = Field(spelled[type_name], required)
    return fields


@dataclass
class _Walk:
    expanded: frozenset[str] | None
    skip_ids: Container[str]
    seen: dict[str, ResourceSeen] | None
    out: list[Violation] = field(default_factory=list)
    # The innermost resource being walked, and its path from the top.
    resource: tuple[str, str] | None = None

    def add(self, path: str, kind: str, message: str) -> None:
        name, where = self.resource or (None, "")
        relative = path[len(where) :].lstrip(".") if where and path.startswith(where) else path
        self.out.append(
            Violation(
                path or "(object)",
                kind,
                message,
                resource=name,
                field=_INDEX.sub("", relative) or "(object)",
            )
        )


def check_object(
    obj: Any,
    *,
    expanded: Iterable[str] | None = None,
    skip_ids: Container[str] = (),
    seen: dict[str, ResourceSeen] | None = None,
) -> list[Violation]:
    """Every way `obj` (a JSON object with an `object` field: a resource, a `list`, a
    `search_result`) departs from the SDK's classes and Stripe's fixtures. `expanded` is the
    request's `expand[]` (paths from the answer's top, `data.refunds` for a list's items): an
    includable field present where it was not asked for is a violation; None leaves that
    unjudged. Objects whose id is in `skip_ids` (deliberately tampered with) are not checked.
    `seen`, if given, gathers what each resource showed (ResourceSeen by `object`)."""
    walk = _Walk(None if expanded is None else frozenset(expanded), skip_ids, seen)
    if not isinstance(obj, dict) or not isinstance(obj.get("object"), str):
        walk.add("", "type", "expected a Stripe object (a JSON object with an `object` field)")
        return walk.out
    _resource(obj, "", walk)
    return walk.out


def check_error(body: Any) -> list[Violation]:
    """An error answer (`{"error": {...}}`) against the SDK's ErrorObject."""
    walk = _Walk(None, (), None)
    struct = error_struct()
    if not isinstance(body, dict) or set(body) != {"error"}:
        walk.add("", "type", 'an error answer is {"error": {...}} and nothing else')
    elif struct is not None:
        _value(struct, body["error"], "error", walk)
    return walk.out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _resource(obj: dict[str, Any], path: str, walk: _Walk) -> None:
    """A dict naming its own class: a page, or a resource."""
    name = obj["object"]
    if name in ("list", "search_result"):
        _value(Collection(name, ANY), obj, path, walk)
        return
    struct = resource_struct(name)
    if struct is None:
        walk.add(_join(path, "object"), "enum", f"no SDK class for object '{name}'")
        return
    _value(struct, obj, path, walk)


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_SCALAR_OK = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "any": lambda v: True,
    "null": lambda v: v is None,
    "empty": lambda v: v == "",
}


def _describe(node: Node) -> str:
    if isinstance(node, Scalar):
        return node.kind
    if isinstance(node, Enum):
        return "one of " + ", ".join(sorted(map(str, node.values)))
    if isinstance(node, OneOf):
        return " or ".join(_describe(option) for option in node.options)
    if isinstance(node, Struct):
        return node.name
    if isinstance(node, Collection):
        return node.object
    return "array" if isinstance(node, ListOf) else "hash"


def _value(node: Node, value: Any, path: str, walk: _Walk) -> None:
    if isinstance(node, Scalar):
        if node is ANY or node.kind == "any":
            if isinstance(value, dict) and isinstance(value.get("object"), str):
                _resource(value, path, walk)  # e.g. an event's data.object
        elif not _SCALAR_OK[node.kind](value):
            walk.add(path, "type", f"expected {node.kind}, got {_kind_of(value)}")
    elif isinstance(node, Struct):
        if not isinstance(value, dict):
            walk.add(path, "type", f"expected {node.name}, got {_kind_of(value)}")
        else:
            _struct(node, value, path, walk)
    elif isinstance(node, OneOf):
        _one_of(node, value, path, walk)
    elif isinstance(node, Enum):
        if not (isinstance(value, str | bool | int) and value in node.values):
            walk.add(path, "enum", f"{value!r} is not {_describe(node)}")
    elif isinstance(node, ListOf):
        if not isinstance(value, list):
            walk.add(path, "type", f"expected array, got {_kind_of(value)}")
        else:
            for index, item in enumerate(value):
                _value(node.item, item, f"{path}[{index}]", walk)
    elif isinstance(node, DictOf):
        if not isinstance(value, dict):
            walk.add(path, "type", f"expected hash, got {_kind_of(value)}")
        elif node.value == ANY and isinstance(value.get("object"), str):
            _resource(value, path, walk)  # untyped, but naming its class: an event's data.object
        else:
            for key, item in value.items():
                _value(node.value, item, _join(path, key), walk)
    elif isinstance(node, Collection):
        _collection(node, value, path, walk)


def _fits(node: Node, value: Any) -> bool:
    """Whether `value` has the shape of `node` at its top (which option of a union it is)."""
    if isinstance(node, Scalar):
        return _SCALAR_OK[node.kind](value)
    if isinstance(node, Enum):
        return isinstance(value, str | bool | int)
    if isinstance(node, ListOf):
        return isinstance(value, list)
    if isinstance(node, Struct):
        if not isinstance(value, dict):
            return False
        named = value.get("object")
        return node.object_name is None or named is None or named == node.object_name
    if isinstance(node, Collection):
        return isinstance(value, dict) and value.get("object") == node.object
    if isinstance(node, DictOf):
        return isinstance(value, dict)
    return any(_fits(option, value) for option in node.options)


def _one_of(node: OneOf, value: Any, path: str, walk: _Walk) -> None:
    candidates = [option for option in node.options if _fits(option, value)]
    if not candidates:
        walk.add(path, "type", f"expected {_describe(node)}, got {_kind_of(value)}")
        return
    if len(candidates) == 1:
        _value(candidates[0], value, path, walk)
        return
    reported: list[Violation] | None = None
    for option in candidates:
        trial = _Walk(walk.expanded, walk.skip_ids, None, resource=walk.resource)
        _value(option, value, path, trial)
        if not trial.out:
            _value(option, value, path, walk)  # again, to gather what it showed
            return
        if reported is None:
            reported = trial.out
    walk.out.extend(reported or [])


def _struct(struct: Struct, value: dict[str, Any], path: str, walk: _Walk) -> None:
    name = struct.object_name
    if name is None:
        _fields(struct, value, path, walk)
        return
    if value.get("id") in walk.skip_ids:
        return
    outer, walk.resource = walk.resource, (name, path)
    try:
        _fields(struct, value, path, walk)
        _resource_checks(struct, name, value, path, walk)
    finally:
        walk.resource = outer


def _fields(struct: Struct, value: dict[str, Any], path: str, walk: _Walk) -> None:
    fields = struct.fields
    for key, item in value.items():
        declared = fields.get(key)
        if declared is None:
            walk.add(_join(path, key), "undeclared", f"{struct.name} declares no field {key}")
        else:
            _value(declared.node, item, _join(path, key), walk)
    for key, declared in fields.items():
        if declared.required and key not in value and (struct.object_name, key) not in INCLUDABLE:
            walk.add(_join(path, key), "missing", f"{struct.name}.{key} is not Optional")


def _resource_checks(
    struct: Struct, name: str, value: dict[str, Any], path: str, walk: _Walk
) -> None:
    """What only a resource has: Stripe's fixture, includable fields, what it showed."""
    fields = struct.fields
    for key in sorted(fixture_fields().get(name, frozenset()) - value.keys()):
        if (name, key) not in INCLUDABLE and not (fields.get(key) and fields[key].required):
            walk.add(_join(path, key), "fixture_missing", f"Stripe's {name} fixture has {key}")
    if walk.expanded is not None:
        where = _INDEX.sub("", path)
        for (resource, key), source in INCLUDABLE.items():
            if resource == name and key in value and _join(where, key) not in walk.expanded:
                walk.add(
                    _join(path, key),
                    "not_expanded",
                    f"Stripe includes {name}.{key} only when expanded ({source})",
                )
    if walk.seen is not None:
        seen = walk.seen.setdefault(name, ResourceSeen())
        seen.count += 1
        seen.fields.update(value.keys() & fields.keys())
        status = value.get("status")
        if isinstance(status, str):
            seen.statuses.add(status)


def _collection(node: Collection, value: Any, path: str, walk: _Walk) -> None:
    if not isinstance(value, dict):
        walk.add(path, "type", f"expected {node.object}, got {_kind_of(value)}")
        return
    if value.get("object") != node.object:
        walk.add(_join(path, "object"), "enum", f"{value.get('object')!r} is not {node.object}")
    fields = _collection_fields(node.object)
    for key, item in value.items():
        if key == "data":
            if not isinstance(item, list):
                walk.add(_join(path, key), "type", f"expected array, got {_kind_of(item)}")
                continue
            for index, element in enumerate(item):
                _value(node.item, element, f"{_join(path, key)}[{index}]", walk)
        elif key in fields:
            if key != "object":
                _value(fields[key].node, item, _join(path, key), walk)
        else:
            walk.add(_join(path, key), "undeclared", f"a {node.object} has no field {key}")
    for key, declared in fields.items():
        if declared.required and key not in value:
            walk.add(_join(path, key), "missing", f"a {node.object} has {key}")
    if "data" not in value:
        walk.add(_join(path, "data"), "missing", f"a {node.object} has data")
