"""One exception handler for the whole API: domain errors, DRF's errors and Django's become the
error envelope; anything unexpected is logged and answered with a 500 envelope, never a trace."""

import logging
import math
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core import exceptions as domain
from core.api.responses import error_body

logger = logging.getLogger("vouch.api")

_DRF_TO_DOMAIN: list[tuple[type[Exception], type[domain.VouchError]]] = [
    (drf.NotAuthenticated, domain.NotAuthenticated),
    (drf.AuthenticationFailed, domain.AuthenticationFailed),
    (drf.PermissionDenied, domain.PermissionDenied),
    (drf.NotFound, domain.NotFound),
    (drf.MethodNotAllowed, domain.MethodNotAllowed),
    (drf.NotAcceptable, domain.NotAcceptable),
    (drf.UnsupportedMediaType, domain.UnsupportedMediaType),
    (drf.ParseError, domain.MalformedRequest),
    (drf.Throttled, domain.Throttled),
    (drf.ValidationError, domain.InvalidInput),
    (Http404, domain.NotFound),
    (RequestDataTooBig, domain.PayloadTooLarge),
    (DjangoPermissionDenied, domain.PermissionDenied),
]


def _as_domain_error(exc: Exception) -> domain.VouchError | None:
    if isinstance(exc, domain.VouchError):
        return exc
    for source, target in _DRF_TO_DOMAIN:
        if isinstance(exc, source):
            if isinstance(exc, drf.ValidationError):
                return target(details=exc.detail)
            if isinstance(exc, drf.Throttled):
                return target(details={"retry_after_s": _retry_after(exc)})
            if isinstance(exc, drf.MethodNotAllowed | drf.ParseError):
                return target(str(getattr(exc, "detail", "")) or None)
            return target()
    return None


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    error = _as_domain_error(exc)
    if error is None:
        view = context.get("view")
        logger.exception("Unhandled error in %s", type(view).__name__ if view else "API view")
        error = domain.InternalError()

    status = error.status_code
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed) and not getattr(
        exc, "auth_header", None
    ):
        # DRF answers 403 when no authenticator offers a WWW-Authenticate challenge.
        status = 403
    response = Response(error_body(error.code, error.message, error.details), status=status)
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        response["WWW-Authenticate"] = auth_header
    if isinstance(exc, drf.Throttled):
        response["Retry-After"] = str(_retry_after(exc))
    return response


def _retry_after(exc: drf.Throttled) -> int:
    """Whole seconds, rounded up (a client that waits that long is let through), at least 1."""
    return max(1, math.ceil(getattr(exc, "wait", None) or 0))
