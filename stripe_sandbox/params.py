"""Decoding Stripe's form encoding (`metadata[key]=v`, `expand[0]=x`) and reading parameters."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

from stripe_sandbox.errors import invalid, missing_parameter

_KEY = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")
_PART = re.compile(r"\[([^\[\]]*)\]")


def decode_form(body: str) -> dict[str, Any]:
    """`a[b][0]=x&c=y` -> {"a": {"b": ["x"]}, "c": "y"}: nested dicts, with dicts whose keys are
    all indexes (or `[]`) turned into lists, as Stripe reads them."""
    root: dict[str, Any] = {}
    for raw_key, value in parse_qsl(body, keep_blank_values=True):
        match = _KEY.match(raw_key)
        if match is None:
            raise invalid(f"Invalid parameter name: {raw_key}", param=raw_key)
        parts = [match.group(1), *_PART.findall(match.group(2))]
        node = root
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if part == "":  # `expand[]=x`: append
                part = str(sum(1 for k in node if k.isdigit()))
            if last:
                node[part] = value
            else:
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    raise invalid(f"Invalid parameter: {raw_key}", param=raw_key)
                node = child
    return _listify(root)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    converted = {key: _listify(value) for key, value in node.items()}
    if converted and all(key.isdigit() for key in converted):
        return [converted[key] for key in sorted(converted, key=int)]
    return converted


class Params:
    """The parameters of one request, read with the checks Stripe applies. Which parameters an
    operation takes, and their types, were checked before the handler ran, against the pinned
    SDK's `*Params` type (contract_checks.py, SPEC §12.1): no hand-typed list of them here
    (STYLE rule 19)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str) -> Any:
        return self.data.get(name)

    def string(
        self, name: str, *, required: bool = False, choices: set[str] | None = None
    ) -> str | None:
        value = self.data.get(name)
        if value is None or value == "":
            if required:
                raise missing_parameter(name)
            return None
        if not isinstance(value, str):
            raise invalid(f"Invalid string: {name}", param=name, code="parameter_invalid_string")
        if choices is not None and value not in choices:
            raise invalid(
                f"Invalid {name}: must be one of {', '.join(sorted(choices))}",
                param=name,
                code="parameter_invalid_string",
            )
        return value

    def required_string(self, name: str) -> str:
        value = self.string(name, required=True)
        if value is None:  # pragma: no cover - string(required=True) raised already
            raise missing_parameter(name)
        return value

    def required_integer(
        self, name: str, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        value = self.integer(name, required=True, minimum=minimum, maximum=maximum)
        if value is None:  # pragma: no cover - integer(required=True) raised already
            raise missing_parameter(name)
        return value

    def integer(
        self,
        name: str,
        *,
        required: bool = False,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int | None:
        value = self.data.get(name)
        if value is None or value == "":
            if required:
                raise missing_parameter(name)
            return None
        if not isinstance(value, str) or not re.fullmatch(r"-?\d+", value):
            raise invalid(f"Invalid integer: {value}", param=name, code="parameter_invalid_integer")
        number = int(value)
        if minimum is not None and number < minimum:
            raise invalid(
                f"Invalid {name}: must be at least {minimum}",
                param=name,
                code="parameter_invalid_integer",
            )
        if maximum is not None and number > maximum:
            raise invalid(
                f"Invalid {name}: must be at most {maximum}",
                param=name,
                code="parameter_invalid_integer",
            )
        return number

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self.data.get(name)
        if value is None or value == "":
            return default
        if value not in ("true", "false"):
            raise invalid(f"Invalid boolean: {value}", param=name)
        return value == "true"

    def metadata(self, name: str = "metadata") -> dict[str, str] | None:
        """Stripe's metadata: up to 50 keys of at most 40 characters, values of at most 500;
        an empty string unsets (the whole metadata, or one key)."""
        value = self.data.get(name)
        if value is None:
            return None
        if value == "":
            return {}
        if not isinstance(value, dict):
            raise invalid("Invalid metadata: must be a hash", param=name)
        if len(value) > 50:
            raise invalid("Invalid metadata: at most 50 keys", param=name)
        for key, item in value.items():
            if not isinstance(item, str):
                raise invalid(f"Invalid metadata[{key}]: must be a string", param=f"{name}[{key}]")
            if len(key) > 40:
                raise invalid(
                    f"Invalid metadata key {key}: at most 40 characters", param=f"{name}[{key}]"
                )
            if len(item) > 500:
                raise invalid(
                    f"Invalid metadata[{key}]: at most 500 characters", param=f"{name}[{key}]"
                )
        return dict(value)

    def expand(self) -> list[str]:
        value = self.data.get("expand")
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise invalid("Invalid expand: must be an array of strings", param="expand")
        return list(value)


def merge_metadata(current: dict[str, str], update: dict[str, str] | None) -> dict[str, str]:
    if update is None:
        return current
    if update == {}:
        return {}
    merged = dict(current)
    for key, value in update.items():
        if value == "":
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
