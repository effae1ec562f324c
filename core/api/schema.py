"""drf-spectacular hooks: the schema lists each route once, at /api/v1/, knows Vouch's two
authentication schemes, documents the Idempotency-Key header's real rules, and documents on every
operation the errors any request can get whatever the view (SPEC §13)."""

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.utils import OpenApiParameter

from core import exceptions
from core.api.responses import error_body
from core.exceptions import VouchError

# What `core.idempotency.validate_key` accepts: 1 to 255 printable ASCII characters (0x20-0x7E).
# An HTTP header value loses its leading and trailing spaces on the way, so the key documented
# neither starts nor ends with one (a key of spaces alone would arrive empty).
IDEMPOTENCY_KEY_MAX_LENGTH = 255
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"

IDEMPOTENCY_KEY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    {
        "type": "string",
        "minLength": 1,
        "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH,
        "pattern": IDEMPOTENCY_KEY_PATTERN,
    },
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Optional; 1 to 255 printable ASCII characters (0x20-0x7E, no leading or trailing "
        "space), else 400 `invalid_idempotency_key`. Scoped to the caller and the operation "
        "(the action and the ids in its path) (SPEC §4): the same key and body replays the "
        "stored answer with `Idempotent-Replayed: true`; while the first request runs, 409 "
        "`idempotency_key_in_use`; another body, 422 `idempotency_key_conflict`; used on "
        "another surface, 422 `idempotency_key_other_surface`. Nothing is stored for a "
        "validation error or a 404: correct and retry under the same key."
    ),
)

# What `core.api.parsing.page_params` accepts: decimal integers within these bounds, else 400
# `validation_error` (never clamped).
PAGE_LIMIT_MAX = 100
BIGINT_MAX = 2**63 - 1
PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX, "default": 20},
        description="Page size, 1 to 100 (default 20).",
    ),
    OpenApiParameter(
        "offset",
        {"type": "integer", "format": "int64", "minimum": 0, "maximum": BIGINT_MAX, "default": 0},
        description="How many to skip (default 0).",
    ),
]


def versioned_routes_only(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """Drop the unversioned /api/ alias: it serves the same routes as /api/v1/."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith("/api/v1/")]


# --- errors every operation can answer --------------------------------------------------------

_ERROR_ENVELOPE_REF = "#/components/schemas/ErrorEnvelope"

# (error, what it means here, only for methods that take a body)
COMMON_ERRORS: list[tuple[type[VouchError], str, bool]] = [
    (
        exceptions.MalformedRequest,
        "The request could not be understood: invalid JSON, or JSON nested too deep.",
        False,
    ),
    (exceptions.NotAcceptable, "The API answers application/json only.", False),
    (
        exceptions.PayloadTooLarge,
        "The body is larger than the server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE).",
        False,
    ),
    (exceptions.UriTooLong, "The URL is longer than REQUEST_MAX_URL_BYTES.", False),
    (
        exceptions.HeadersTooLarge,
        "More headers than REQUEST_MAX_HEADERS, or one longer than REQUEST_MAX_HEADER_BYTES.",
        False,
    ),
    (exceptions.UnsupportedMediaType, "Send the body as application/json.", True),
    (
        exceptions.Throttled,
        "Too many requests for this caller (per user and per token; stricter on routes that "
        "move money). Retry after `Retry-After` seconds.",
        False,
    ),
]

_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 0},
        "description": "Seconds to wait before retrying.",
    }
}
_REPLAYED = {
    "Idempotent-Replayed": {
        "schema": {"type": "string", "enum": ["true"]},
        "description": "Present when this is the stored answer of an earlier request with the "
        "same Idempotency-Key and body.",
    }
}


def _add_error(operation: dict[str, Any], status: int, code: str, message: str) -> None:
    """Add `code` to the operation's response for `status`, creating it if needed."""
    responses = operation.setdefault("responses", {})
    response = responses.setdefault(
        str(status),
        {
            "content": {"application/json": {"schema": {"$ref": _ERROR_ENVELOPE_REF}}},
            "description": "Error codes: ",
        },
    )
    if f"`{code}`" in response.get("description", ""):
        return
    description = response.get("description", "")
    separator = "" if description.endswith(": ") else ", "
    response["description"] = f"{description}{separator}`{code}`"
    content = response.setdefault("content", {}).setdefault("application/json", {})
    content.setdefault("schema", {"$ref": _ERROR_ENVELOPE_REF})
    content.setdefault("examples", {})[code] = {"value": error_body(code, message)}


def document_common_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """Every operation can answer these whatever its view does: malformed input (400), a wrong
    Accept (406), a body too large (413), a URL too long (414), too many or too large headers
    (431), a body that is not JSON (415, methods with a body), the throttles (429 with
    Retry-After). An operation taking an Idempotency-Key may answer a replay,
    marked by the Idempotent-Replayed header."""
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            for error, message, body_only in COMMON_ERRORS:
                if not body_only or method in {"post", "put", "patch"}:
                    _add_error(operation, error.status_code, error.code, message)
            operation["responses"]["429"].setdefault("headers", {}).update(_RETRY_AFTER)
            if any(p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
                for status, response in operation["responses"].items():
                    if status.startswith("2"):
                        response.setdefault("headers", {}).update(_REPLAYED)
    return result


# --- request bodies -----------------------------------------------------------------------------


class StrictSerializerScheme(OpenApiSerializerExtension):
    """A `Strict` body refuses unknown fields (400): its schema says so."""

    target_class = "core.api.parsing.Strict"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)
        schema["additionalProperties"] = False
        return schema


# What a DRF CharField accepts (trim_whitespace, allow_blank off, ProhibitNullCharactersValidator):
# no NUL character, and something besides whitespace.
# `\s` as JSON Schema (ECMA-262) reads it, plus what Python's str.strip() also drops (the
# separators \x1c-\x1f and NEL \x85): a value of those alone is blank to DRF, so not non-blank here.
TEXT_PATTERN = r"^[^\x00]*[^\s\x00\x1c-\x1f\x85][^\x00]*$"


class StrictCharFieldScheme(OpenApiSerializerFieldExtension):
    """A StrictCharField refuses a NUL character and a value of whitespace alone (400
    `validation_error`): its schema says so."""

    target_class = "core.api.parsing.StrictCharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer_field(
            self.target, direction, bypass_extensions=True
        )
        if not self.target.allow_blank and self.target.trim_whitespace:
            schema.setdefault("pattern", TEXT_PATTERN)
        return schema


# --- authentication schemes -------------------------------------------------------------------


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token from `manage.py issue_token <username>`. "
            "Tokens may read; they cannot move money.",
        }


class CsrfSessionScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.CsrfSessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "The session of a person logged in at /accounts/login/. Unsafe "
            "methods also need the X-CSRFToken header.",
        }
