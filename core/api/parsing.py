"""Strict parsing of JSON bodies for every API view: exact JSON types (no silent coercion),
unknown fields refused, and one validation error shape."""

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from core import exceptions as core_errors

MICRO = "Micro-dollars: 1 USD = 1,000,000 micro (not cents). Each `_micro` field has a `_usd` twin."


class MicroField(serializers.IntegerField):
    """A JSON integer, nothing else (no strings, floats or booleans), within a 64-bit column."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", MICRO)
        super().__init__(min_value=-(2**63), max_value=2**63 - 1, **kwargs)

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictCharField(serializers.CharField):
    """A JSON string, nothing else (a number is not silently turned into one)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class Strict(serializers.Serializer):
    """Unknown fields are refused, not ignored."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = (
            set(self.initial_data) - set(self.fields)
            if isinstance(self.initial_data, dict)
            else set()
        )
        if unknown:
            raise serializers.ValidationError(
                {name: ["Unknown field."] for name in sorted(unknown)}
            )
        return attrs


def request_body(request: Request) -> Any:
    """The request's parsed JSON. An absent body is `{}` (DRF parses no body as an empty object);
    a body that says `null`, `[]`, `0` or `"all"` is what it says, never taken for `{}`."""
    return request.data


def request_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object (an absent body is `{}`), else `validation_error`."""
    data = request_body(request)
    if not isinstance(data, dict):
        raise core_errors.InvalidInput(
            "The body must be a JSON object (or absent).",
            details={"body": [f"Expected a JSON object, got {_json_type(data)}."]},
        )
    return dict(data)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def parse_body(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The request's JSON object (no body is `{}`), validated by `serializer_class`."""
    data = request_object(request)
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise core_errors.InvalidInput(details=serializer.errors)
    return dict(serializer.validated_data)


def page_params(request: Request, *, default: int = 20, most: int = 100) -> tuple[int, int]:
    """`limit` (1 to `most`, default `default`) and `offset` (0 or more) from the query string."""
    try:
        limit = min(max(int(request.query_params.get("limit", default)), 1), most)
        offset = max(int(request.query_params.get("offset", 0)), 0)
    except ValueError as exc:
        raise core_errors.InvalidInput("limit and offset are integers.") from exc
    return limit, offset
