"""Domain errors. Each has a stable `code` (the contract with API clients) and the HTTP status
the API answers with; the message is for people. One handler (core.api.exception_handler) turns
them, and DRF's own errors, into the error envelope of SPEC §13."""

from typing import Any, ClassVar


class VouchError(Exception):
    code: ClassVar[str] = "error"
    status_code: ClassVar[int] = 400
    default_message: ClassVar[str] = "The request could not be completed."
    # Whether the answer is kept under an Idempotency-Key (only if state changed or the provider
    # was called; a validation error or a 404 is not, so the client can correct and retry).
    stores_idempotent_response: ClassVar[bool] = False

    def __init__(self, message: str | None = None, *, details: Any = None) -> None:
        self.message = message or self.default_message
        self.details = {} if details is None else details
        super().__init__(self.message)


class InvalidInput(VouchError):
    code = "validation_error"
    status_code = 400
    default_message = "The request is not valid."


class MalformedRequest(VouchError):
    code = "malformed_request"
    status_code = 400
    default_message = "The request body could not be parsed as JSON."


class NotAuthenticated(VouchError):
    code = "not_authenticated"
    status_code = 401
    default_message = "Log in, or send Authorization: Bearer <token>."


class AuthenticationFailed(VouchError):
    code = "authentication_failed"
    status_code = 401
    default_message = "The credentials sent are not valid."


class PermissionDenied(VouchError):
    code = "permission_denied"
    status_code = 403
    default_message = "You do not have permission to do this."


class CsrfFailed(VouchError):
    code = "csrf_failed"
    status_code = 403
    default_message = "CSRF check failed: send the X-CSRFToken header with the csrftoken cookie."


class SessionRequired(VouchError):
    code = "session_required"
    status_code = 403
    default_message = "This action needs a logged-in session; an API token cannot do it."


class NotFound(VouchError):
    code = "not_found"
    status_code = 404
    default_message = "Not found."


class MethodNotAllowed(VouchError):
    code = "method_not_allowed"
    status_code = 405
    default_message = "This method is not allowed here."


class NotAcceptable(VouchError):
    code = "not_acceptable"
    status_code = 406
    default_message = "This API answers only application/json."


class UnsupportedMediaType(VouchError):
    code = "unsupported_media_type"
    status_code = 415
    default_message = "Send the request body as application/json."


class PayloadTooLarge(VouchError):
    code = "payload_too_large"
    status_code = 413
    default_message = "The request body is larger than this API accepts."


class UriTooLong(VouchError):
    code = "uri_too_long"
    status_code = 414
    default_message = "The URL is longer than this API accepts."


class HeadersTooLarge(VouchError):
    code = "headers_too_large"
    status_code = 431
    default_message = "The request's headers are larger or more numerous than this API accepts."


class Throttled(VouchError):
    code = "rate_limited"
    status_code = 429
    default_message = "Too many requests; retry after the number of seconds in Retry-After."


class InternalError(VouchError):
    code = "internal_error"
    status_code = 500
    default_message = "Something went wrong on our side; it has been logged."
