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

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.code is not None:
            error["code"] = self.code
            error["doc_url"] = f"https://stripe.com/docs/error-codes/{self.code.replace('_', '-')}"
        if self.param is not None:
            error["param"] = self.param
        error.update(self.extra)
        return {"error": error}


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
