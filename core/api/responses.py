"""The two response envelopes of SPEC §13, for views and for the OpenAPI schema."""

from typing import Any

from django.http import JsonResponse
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from core.api.parsing import escaped
from core.exceptions import VouchError


def ok(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A success response: {"success": true, "data": ...}."""
    return Response({"success": True, "data": data}, status=status, headers=headers)


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The error envelope. Every string in it (the message, a field's name, a detail) is made
    encodable: a lone surrogate echoed from the request becomes its escaped form (`\\ud800`, as
    `core.api.parsing.escaped` writes it), which the JSON renderer can send where the raw one
    would fail it with a 500."""
    return {
        "success": False,
        "error": {
            "code": code,
            "message": _encodable(message),
            "details": {} if details is None else _encodable(details),
        },
    }


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return escaped(value)  # an ErrorDetail stays a str (its code is not rendered)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(item) for item in value]
    return value


def error_json_response(code: str, message: str, status: int) -> JsonResponse:
    """The error envelope for responses produced outside DRF (Django's 404, 500, ...)."""
    return JsonResponse(error_body(code, message), status=status)


# --- OpenAPI ---------------------------------------------------------------------------------

_ErrorDetail = inline_serializer(
    name="ErrorDetail",
    fields={
        "code": serializers.CharField(help_text="Stable error code: the contract with clients."),
        "message": serializers.CharField(help_text="What went wrong, for people."),
        "details": serializers.JSONField(help_text="Field errors or other structured detail."),
    },
)

ErrorEnvelope = inline_serializer(
    name="ErrorEnvelope",
    fields={"success": serializers.BooleanField(default=False), "error": _ErrorDetail},
)


def success_envelope(
    data: serializers.BaseSerializer | type[serializers.BaseSerializer], *, name: str
) -> Any:
    """The success envelope wrapping `data` (a serializer class or instance) in the schema."""
    field = data() if isinstance(data, type) else data
    return inline_serializer(
        name=name, fields={"success": serializers.BooleanField(default=True), "data": field}
    )


def error_responses(*errors: type[VouchError]) -> dict[int, OpenApiResponse]:
    """OpenAPI responses listing, per status, every error code the endpoint can answer with."""
    by_status: dict[int, list[type[VouchError]]] = {}
    for error in errors:
        by_status.setdefault(error.status_code, []).append(error)
    return {
        status: OpenApiResponse(
            response=ErrorEnvelope,
            description="Error codes: " + ", ".join(f"`{e.code}`" for e in group),
            examples=[
                OpenApiExample(
                    e.code,
                    value=error_body(e.code, e.default_message),
                    response_only=True,
                    status_codes=[str(status)],
                )
                for e in group
            ],
        )
        for status, group in by_status.items()
    }
