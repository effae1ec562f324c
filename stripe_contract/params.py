"""A request's parameters against the operation's generated `*Params` TypedDict.

`data` is the form body decoded as Stripe reads it (`stripe_sandbox.params.decode_form`): nested
dicts, lists, every leaf a string. The error codes are the ones Stripe documents
(https://docs.stripe.com/error-codes): `parameter_unknown`, `parameter_missing`,
`parameter_invalid_empty` (an empty string, Stripe's "unset", for a parameter that cannot be
unset), `parameter_invalid_integer`. Stripe's refusal of a malformed boolean, number, hash, array or
enum value carries no code (e.g. `Invalid boolean: True`, `error_code=None`:
https://github.com/stripe/stripe-python/issues/487), so those violations have none either."""

from __future__ import annotations

import re
from typing import Any

from stripe_contract.known import REMOVED_PARAMS
from stripe_contract.operations import Operation
from stripe_contract.types import (
    EMPTY,
    Collection,
    DictOf,
    Enum,
    ListOf,
    Node,
    OneOf,
    Scalar,
    Struct,
)
from stripe_contract.violations import REQUEST_KINDS, Violation

_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_RANK = {kind: rank for rank, kind in enumerate(REQUEST_KINDS)}


def check_params(operation: Operation, data: dict[str, Any]) -> list[Violation]:
    """Every way `data` departs from what the SDK declares for `operation`, the violation Stripe
    would refuse the request for first."""
    out: list[Violation] = []
    removed = REMOVED_PARAMS.get(operation.service, {})
    for name in data:
        if name in removed:
            code, message, _source = removed[name]
            out.append(Violation(name, "removed", message, code))
    params = operation.params
    if params is None:
        out.extend(_unknown(name) for name in data if name not in removed)
    else:
        _struct(params, {k: v for k, v in data.items() if k not in removed}, "", out)
    out.sort(key=lambda violation: _RANK[violation.kind])
    return out


def _name(parent: str, key: str | int) -> str:
    return f"{parent}[{key}]" if parent else str(key)


def _unknown(param: str) -> Violation:
    return Violation(param, "unknown", f"Received unknown parameter: {param}", "parameter_unknown")


def _empty(param: str) -> Violation:
    return Violation(
        param,
        "empty",
        f"You passed an empty string for '{param}'. We assume empty values are an attempt to "
        f"unset a parameter; however '{param}' cannot be unset. You should remove '{param}' from "
        "your request or supply a non-empty value.",
        "parameter_invalid_empty",
    )


def _type(param: str, expected: str, value: Any) -> Violation:
    shown = value if isinstance(value, str) else type(value).__name__
    code = "parameter_invalid_integer" if expected == "integer" else None
    return Violation(param, "type", f"Invalid {expected}: {shown}", code)


def _struct(struct: Struct, value: dict[str, Any], param: str, out: list[Violation]) -> None:
    fields = struct.fields
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            out.append(_unknown(_name(param, key)))
        else:
            check_value(field.node, item, _name(param, key), out)
    for key, field in fields.items():
        if field.required and key not in value:
            name = _name(param, key)
            out.append(
                Violation(name, "missing", f"Missing required param: {name}.", "parameter_missing")
            )


def _shape(node: Node) -> str:
    """What a form value for `node` looks like: "str" (a leaf), "dict", "list" or "any"."""
    if isinstance(node, Scalar):
        return "any" if node.kind == "any" else "str"
    if isinstance(node, Enum):
        return "str"
    if isinstance(node, ListOf):
        return "list"
    return "dict"  # Struct, DictOf, Collection


def _value_shape(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict) and value and all(key.isdigit() for key in value):
        return "indexed"  # `x[0]=…` left as a dict: a list, or a hash with numeric keys
    return "dict" if isinstance(value, dict) else "other"


def check_value(node: Node, value: Any, param: str, out: list[Violation]) -> None:
    """One form value against one node, violations appended to `out`."""
    if isinstance(node, OneOf):
        _one_of(node, value, param, out)
    elif isinstance(node, Scalar):
        _scalar(node.kind, value, param, out)
    elif isinstance(node, Enum):
        if not isinstance(value, str):
            out.append(_type(param, "string", value))
        elif value not in node.values:
            if value == "":
                out.append(_empty(param))
            else:
                allowed = sorted(str(v) for v in node.values)
                shown = ", ".join(allowed[:-1]) + (f", or {allowed[-1]}" if allowed else "")
                out.append(
                    Violation(param, "enum", f"Invalid {param}: must be one of {shown}", None)
                )
    elif isinstance(node, ListOf):
        items = _list_items(value)
        if items is None:
            out.append(_type(param, "array", value) if value != "" else _empty(param))
        else:
            for index, item in enumerate(items):
                check_value(node.item, item, _name(param, index), out)
    elif isinstance(node, DictOf):
        if not isinstance(value, dict):
            out.append(_type(param, "hash", value) if value != "" else _empty(param))
            return
        for key, item in value.items():
            if item == "" and _shape(node.value) == "str":
                continue  # `metadata[key]=` unsets that key
            check_value(node.value, item, _name(param, key), out)
    elif isinstance(node, Struct):
        if not isinstance(value, dict):
            out.append(_type(param, "hash", value) if value != "" else _empty(param))
        else:
            _struct(node, value, param, out)
    elif isinstance(node, Collection):  # pragma: no cover - never a request parameter
        out.append(_type(param, "hash", value))


def _list_items(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and all(key.isdigit() for key in value):
        return [value[key] for key in sorted(value, key=int)]
    return None


def _scalar(kind: str, value: Any, param: str, out: list[Violation]) -> None:
    if kind == "any":
        return
    if kind == "empty":
        if value != "":
            out.append(_type(param, "value (only an empty string, to unset)", value))
        return
    if not isinstance(value, str):
        expected = {"str": "string", "int": "integer", "float": "decimal", "bool": "boolean"}
        out.append(_type(param, expected.get(kind, kind), value))
        return
    if value == "":
        out.append(_empty(param))
    elif kind == "int" and not _INTEGER.fullmatch(value):
        out.append(_type(param, "integer", value))
    elif kind == "float" and not _DECIMAL.fullmatch(value):
        out.append(_type(param, "decimal", value))
    elif kind == "bool" and value not in ("true", "false"):
        out.append(_type(param, "boolean", value))


def _one_of(node: OneOf, value: Any, param: str, out: list[Violation]) -> None:
    shape = _value_shape(value)
    # `x[0]=…` left as a dict is a list, unless only a hash is expected.
    wanted = {"list", "dict", "any"} if shape == "indexed" else {shape, "any"}
    candidates = [option for option in node.options if _shape(option) in wanted]
    if not candidates:
        expected = " or ".join(sorted({_shape(option) for option in node.options}))
        out.append(_type(param, expected.replace("str", "string").replace("dict", "hash"), value))
        return
    # The empty string that unsets is tried last, so that a refusal names the real expectation.
    candidates.sort(key=lambda option: option is EMPTY)
    reported: list[Violation] | None = None
    for option in candidates:
        found: list[Violation] = []
        check_value(option, value, param, found)
        if not found:
            return
        if reported is None:
            reported = found
    out.extend(reported or [])
