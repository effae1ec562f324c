"""Stripe's error format: {"error": {"type", "code", "message", "param", ...}}."""

from __future__ import annotations

from typing import Any


class StripeError(Exception):
    """An error answered in Stripe's wire format.

    `stored` says whether the idempotency layer saves this answer under the request's key. Stripe
    saves the result of every request whose endpoint started executing (a declined card, an
    over-refund), but not a request refused by parameter validation, so that the client can correct
    it and retry under the same key."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        stored: bool = True,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.stored = stored
        self.extra = extra or {}
        self.headers = headers or {}

    def body(self, request_log_url: str | None = None) -> dict[str, Any]:
        """The answer's JSON. `request_log_url`: the request's entry in the Dashboard's request
        log, which Stripe names in every error of a request it could tie to an account."""
        error: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.code is not None:
            error["code"] = self.code
            error["doc_url"] = f"https://stripe.com/docs/error-codes/{self.code.replace('_', '-')}"
        if self.param is not None:
            error["param"] = self.param
        if request_log_url is not None:
            error["request_log_url"] = request_log_url
        error.update(self.extra)
        return {"error": error}


def request_log_url(request_id: str, at: int) -> str:
    """Where the test-mode Dashboard shows a request: Stripe's `request_log_url`
    (https://docs.stripe.com/api/errors), e.g. https://dashboard.stripe.com/test/logs/req_…?t=…"""
    return f"https://dashboard.stripe.com/test/logs/{request_id}?t={at}"


# Stripe's limit on an idempotency key, and its answer to one outside it
# (https://docs.stripe.com/api/idempotent_requests: "up to 255 characters long").
IDEMPOTENCY_KEY_MAX = 255


def idempotency_key_length(key: str) -> StripeError:
    """A key outside 1-255 characters: refused before anything runs (so never stored)."""
    return StripeError(
        400,
        f"Idempotent key length is {len(key)} characters long, which is outside accepted "
        f"lengths. Idempotent Keys must be 1-{IDEMPOTENCY_KEY_MAX} characters long. If you're "
        "looking for a decent generator, try using a UUID defined by IETF RFC 4122.",
        type="idempotency_error",
        stored=False,
    )


def invalid(message: str, *, param: str | None = None, code: str | None = None) -> StripeError:
    """A parameter validation failure: 400, never stored under the idempotency key."""
    return StripeError(400, message, code=code, param=param, stored=False)


def unknown_parameter(name: str) -> StripeError:
    return invalid(f"Received unknown parameter: {name}", param=name, code="parameter_unknown")


def missing_parameter(name: str) -> StripeError:
    return invalid(f"Missing required param: {name}.", param=name, code="parameter_missing")


def resource_missing(kind: str, object_id: str, *, param: str = "id") -> StripeError:
    return StripeError(
        404 if param == "id" else 400,
        f"No such {kind}: '{object_id}'",
        code="resource_missing",
        param=param,
        stored=False,
    )
