"""Strict parsing of JSON bodies for every API view: exact JSON types (no silent coercion),
unknown fields refused, and one validation error shape."""

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import parsers, serializers
from rest_framework.exceptions import ParseError
from rest_framework.request import Request

from core import exceptions as core_errors

# No body this API takes nests deeper than a few levels; a deeper one is refused before anything
# walks it (the digest of an Idempotency-Key's body, the serializers).
MAX_JSON_DEPTH = 32
# The range of a PostgreSQL bigint: OFFSET and every integer column.
BIGINT_MAX = 2**63 - 1

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


_MICRO_ONLY: dict[type[serializers.Serializer], Any] = {}


class StrictCharField(serializers.CharField):
    """A JSON string, nothing else (a number is not silently turned into one). Its `max_length`
    counts the string as sent, as the schema's `maxLength` does: DRF would count it after trimming
    whitespace, and take 201 characters whose first is a space (or U+0085) under a limit of 200."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
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
    if _plain_micro(serializer_class, data):
        return data
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise core_errors.InvalidInput(details=serializer.errors)
    return dict(serializer.validated_data)


def _micro_only(
    serializer_class: type[serializers.Serializer],
) -> tuple[frozenset[str], ...] | None:
    """(every field, the required ones) of a serializer whose fields are all MicroFields, else
    None. Worked out once per class."""
    found = _MICRO_ONLY.get(serializer_class, False)
    if found is False:
        fields = serializer_class().fields
        found = _MICRO_ONLY[serializer_class] = (
            (
                frozenset(fields),
                frozenset(name for name, field in fields.items() if field.required),
            )
            if issubclass(serializer_class, Strict)
            and serializer_class.validate is Strict.validate
            and fields
            and all(_plain_field(name, field, serializer_class) for name, field in fields.items())
            else None
        )
    return found


_FIELD_STEPS = ("run_validation", "to_internal_value", "validate_empty_values", "run_validators")


def _plain_field(name: str, field: Any, serializer_class: type[serializers.Serializer]) -> bool:
    """A MicroField that checks nothing of its own (no step of its validation overridden, no
    validator beyond the bigint range, no `validate_<name>` on the serializer)."""
    return (
        isinstance(field, MicroField)
        and not field.allow_null
        and not field.read_only
        and all(getattr(type(field), step) is getattr(MicroField, step) for step in _FIELD_STEPS)
        and len(field.validators) == 2  # the bigint range's minimum and maximum
        and not hasattr(serializer_class, f"validate_{name}")
    )


def _plain_micro(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> bool:
    """`data` is what `serializer_class`, all of whose fields are MicroFields, answers as is: known
    fields only, the required ones present, each a JSON integer in a bigint's range. Such a body
    (a refund's `{}` or `{"amount_micro": N}`) needs no serializer built, which was a few percent
    of a refund's CPU (bench/README.md, issue 15); any other body goes through the serializer,
    which words its errors."""
    shape = _micro_only(serializer_class)
    if shape is None:
        return False
    known, required = shape
    return (
        data.keys() <= known
        and required <= data.keys()
        and all(
            type(value) is int and -BIGINT_MAX - 1 <= value <= BIGINT_MAX for value in data.values()
        )
    )


def page_params(request: Request, *, default: int = 20, most: int = 100) -> tuple[int, int]:
    """`limit` (1 to `most`, default `default`) and `offset` (0 to the largest bigint, default 0)
    from the query string; anything else is `validation_error`, never clamped or truncated."""
    limit = query_int(request, "limit", default=default, least=1, most=most)
    offset = query_int(request, "offset", default=0, least=0, most=BIGINT_MAX)
    return limit, offset


def query_int(request: Request, name: str, *, default: int, least: int, most: int) -> int:
    """The query parameter `name` as a decimal integer from `least` to `most` (`default` when
    absent), else `validation_error` naming it."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # ASCII digits only: int() would also take "1_000", " 5" and other scripts' digits. Twenty
    # digits bound the conversion before the range check.
    if raw.isascii() and raw.isdigit() and len(raw) <= 20 and least <= int(raw) <= most:
        return int(raw)
    message = f"{name} must be an integer from {least} to {most}."
    raise core_errors.InvalidInput(message, details={name: [message]})


def query_text(request: Request, name: str) -> str | None:
    """The query parameter `name` (None when absent); a NUL character, which no stored value
    can hold, is `validation_error`."""
    raw = request.query_params.get(name)
    if raw is not None and "\x00" in raw:
        message = f"{name} must not contain a NUL character."
        raise core_errors.InvalidInput(message, details={name: [message]})
    return raw


def path_id(value: str) -> str:
    """An id from the URL path. One holding a NUL character names nothing that can exist: the
    same `not_found` as any unknown id, before it reaches the database or an idempotency key."""
    if "\x00" in value:
        raise core_errors.NotFound()
    return value


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with three more refusals: a body over DATA_UPLOAD_MAX_MEMORY_SIZE
    (`payload_too_large`, before it is read), JSON nested deeper than MAX_JSON_DEPTH
    (`malformed_request`, where the plain parser raises RecursionError), and a lone surrogate
    (`validation_error`): JSON's `"\\ud800"` parses to a str that no UTF-8 encodes, which neither
    a column nor the response could hold. The error names the top-level field whose key or value
    holds it (`body` for a body that is no object), by its escaped form (see `escaped`)."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        request = (parser_context or {}).get("request")
        if request is not None:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            length = request.META.get("CONTENT_LENGTH") or 0
            if limit is not None and str(length).isdigit() and int(length) > limit:
                raise core_errors.PayloadTooLarge(
                    f"The request body is over {limit} bytes.", details={"max_bytes": limit}
                )
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(_TOO_DEEP) from exc
        if _nested_deeper_than(data, MAX_JSON_DEPTH):
            raise ParseError(_TOO_DEEP)
        _refuse_lone_surrogates(data)
        return data


_TOO_DEEP = f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels."


def _nested_deeper_than(value: Any, most: int) -> bool:
    """Whether `value` nests arrays and objects more than `most` deep (iterative: no recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= most:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def escaped(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate becomes its Python escape (`\\ud800`, six
    characters), everything else is left as it is. Stable, so a field is named the same way on
    every answer."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _unencodable(value: Any) -> bool:
    """Whether a lone surrogate lies anywhere in `value` (its keys included)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and escaped(item) != item:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_LONE_SURROGATE = "Holds a lone surrogate (shown escaped, as \\ud800), which is not text."


def _refuse_lone_surrogates(data: Any) -> None:
    if not _unencodable(data):
        return
    fields = (
        sorted(escaped(name) for name, value in data.items() if _unencodable([name, value]))
        if isinstance(data, dict)
        else ["body"]
    )
    raise core_errors.InvalidInput(
        "The body holds text that is not valid Unicode.",
        details={name: [_LONE_SURROGATE] for name in fields},
    )
