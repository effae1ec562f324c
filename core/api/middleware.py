"""Under /api/, every error is JSON in the error envelope, including the ones Django produces
itself (an unknown path, an exception outside a DRF view), in DEBUG as in production."""

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from core.api.responses import error_json_response

logger = logging.getLogger("vouch.api")

API_PREFIX = "/api/"

_CODES = {
    400: ("malformed_request", "The request could not be understood."),
    401: ("not_authenticated", "Log in, or send Authorization: Bearer <token>."),
    403: ("permission_denied", "You do not have permission to do this."),
    404: ("not_found", "Not found."),
    405: ("method_not_allowed", "This method is not allowed here."),
    413: ("payload_too_large", "The request body is larger than this API accepts."),
    414: ("uri_too_long", "The URL is longer than this API accepts."),
    429: ("rate_limited", "Too many requests; retry after the number of seconds in Retry-After."),
    431: ("headers_too_large", "The request's headers are larger than this API accepts."),
    500: ("internal_error", "Something went wrong on our side; it has been logged."),
}


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


class ApiJsonErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _is_api(request) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        code, message = _CODES.get(response.status_code, _CODES[500])
        status = response.status_code if response.status_code in _CODES else 500
        json_response = error_json_response(code, message, status)
        if response.has_header("Allow"):
            json_response["Allow"] = response["Allow"]
        return json_response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_api(request):
            return None
        logger.exception("Unhandled error under %s", request.path_info)
        code, message = _CODES[500]
        return error_json_response(code, message, 500)


class RequestLimitsMiddleware:
    """Django's own bounds on a request's URL and headers, below gunicorn's (gunicorn.conf.py), so
    that an API client is told in the error envelope: 414 `uri_too_long` past
    REQUEST_MAX_URL_BYTES, 431 `headers_too_large` past REQUEST_MAX_HEADERS fields or a field past
    REQUEST_MAX_HEADER_BYTES. Under the OAuth server's machine routes (OAUTH_JSON_PATHS) the OAuth
    error object `invalid_request`; elsewhere outside /api/, a plain-text answer; there too
    (the admin's object ids and filters), a NUL character, which no stored text can hold, is 404
    in the path and 400 in the query string. API views check the ids and values they read
    themselves (core.api.parsing), so that their 404 is the unknown id's, byte for byte."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = _over_limits(request)
        if refusal is None and not _is_api(request):
            refusal = _nul_outside_api(request)
        if refusal is None:
            return self.get_response(request)
        status, code, message = refusal
        if _is_api(request):
            return error_json_response(code, message, status)
        if request.path_info.startswith(tuple(settings.OAUTH_JSON_PATHS)):
            # An OAuth client reads RFC 6749 §5.2's JSON error there (RFC 7591 §3.2.2, RFC 8414).
            return JsonResponse(
                {"error": "invalid_request", "error_description": message}, status=status
            )
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def _over_limits(request: HttpRequest) -> tuple[int, str, str] | None:
    meta = request.META
    # gunicorn passes the request target as sent (RAW_URI); other servers, path and query.
    url = meta.get("RAW_URI") or f"{meta.get('PATH_INFO', '')}?{meta.get('QUERY_STRING', '')}"
    if len(url) > settings.REQUEST_MAX_URL_BYTES:
        return 414, "uri_too_long", f"The URL is over {settings.REQUEST_MAX_URL_BYTES} bytes."
    fields = [
        (name, value)
        for name, value in meta.items()
        if name.startswith("HTTP_") or name in ("CONTENT_TYPE", "CONTENT_LENGTH")
    ]
    if len(fields) > settings.REQUEST_MAX_HEADERS:
        return 431, "headers_too_large", f"More than {settings.REQUEST_MAX_HEADERS} header fields."
    # Name, ": " and value, as on the wire (the name as sent is as long as its META key, less
    # the HTTP_ prefix).
    if any(
        len(name.removeprefix("HTTP_")) + 2 + len(str(value)) > settings.REQUEST_MAX_HEADER_BYTES
        for name, value in fields
    ):
        return (
            431,
            "headers_too_large",
            f"A header field is over {settings.REQUEST_MAX_HEADER_BYTES} bytes.",
        )
    return None


def _nul_outside_api(request: HttpRequest) -> tuple[int, str, str] | None:
    if "\x00" in request.path_info:
        return 404, "not_found", "Not found."
    if any("\x00" in key + "".join(values) for key, values in request.GET.lists()):
        return 400, "malformed_request", "The query string must not contain a NUL character."
    return None
