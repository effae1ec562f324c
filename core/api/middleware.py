"""Under /api/, every error is JSON in the error envelope, including the ones Django produces
itself (an unknown path, an exception outside a DRF view), in DEBUG as in production."""

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

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
