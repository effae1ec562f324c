"""How a Stripe error is read: refused (the provider definitely did nothing) or unknown, and
whether to retry it; and the bounded retry policy."""

from __future__ import annotations

from dataclasses import dataclass

import stripe

from providers.outcomes import OutcomeKind


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    # A Retry-After longer than this is not waited for: the outcome is then unknown.
    max_retry_after_s: float = 10.0


@dataclass(frozen=True)
class _Failure:
    kind: OutcomeKind
    code: str
    retry: bool
    retry_after_s: float | None = None


def classify(exc: stripe.StripeError) -> _Failure:
    """Sort a Stripe error into refused (definite), unknown, and whether to retry it."""
    status = exc.http_status
    headers = exc.headers or {}
    error = getattr(exc, "error", None)
    code = (getattr(error, "code", None) if error is not None else None) or exc.code
    should_retry = headers.get("Stripe-Should-Retry") if hasattr(headers, "get") else None
    if isinstance(exc, stripe.APIConnectionError):
        # Sent, perhaps applied, no answer (timeout, reset): only the provider can tell.
        return _Failure(OutcomeKind.UNKNOWN, "network_error", retry=True)
    if isinstance(exc, stripe.IdempotencyError):
        # The key was first used with other parameters: what that request did is unknown here.
        return _Failure(OutcomeKind.UNKNOWN, "idempotency_error", retry=False)
    if isinstance(exc, stripe.RateLimitError) or status == 429:
        retry_after = headers.get("Retry-After") if hasattr(headers, "get") else None
        return _Failure(
            OutcomeKind.UNKNOWN,
            "rate_limit",
            retry=should_retry != "false",
            retry_after_s=float(retry_after) if retry_after and retry_after.isdigit() else None,
        )
    if status is not None and (status == 409 or status >= 500):
        return _Failure(
            OutcomeKind.UNKNOWN,
            code or ("conflict" if status == 409 else "server_error"),
            retry=should_retry != "false",
        )
    if status is not None and 400 <= status < 500:
        # 400, 401, 402, 403, 404: the provider refused and did nothing.
        return _Failure(OutcomeKind.REFUSED, code or type(exc).__name__, retry=False)
    return _Failure(OutcomeKind.UNKNOWN, code or "unexpected_error", retry=False)
