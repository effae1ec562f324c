"""What the provider adapter counts: every call (an operation, retries included) by outcome, and
how long it took. Counted in process (prometheus-client; multiprocess mode when
`PROMETHEUS_MULTIPROC_DIR` is set, so gunicorn's and Celery's workers add up) and exposed by
`/metrics` (ops)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Histogram

logger = logging.getLogger("vouch.providers")

PROVIDER_CALLS = Counter(
    "vouch_provider_calls",
    "Calls to the payment provider (one operation, retries included), by operation and outcome "
    "(accepted, refused, unknown; error: the call raised).",
    ["operation", "outcome"],
)
PROVIDER_ATTEMPTS = Counter(
    "vouch_provider_attempts",
    "HTTP requests made to the payment provider (a call's first request and its retries).",
    ["operation"],
)
PROVIDER_CALL_SECONDS = Histogram(
    "vouch_provider_call_seconds",
    "Time one provider call took, retries and backoff included, by operation and outcome.",
    ["operation", "outcome"],
    buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
)
PROVIDER_BUDGET_WAIT_SECONDS = Histogram(
    "vouch_provider_budget_wait_seconds",
    "Time a provider request waited for a slot of Stripe's rate budgets (core.budget), by "
    "endpoint (e.g. `POST /v1/refunds`) and priority (money, person, readback, reconcile).",
    ["endpoint", "priority"],
    buckets=(0.001, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
PROVIDER_NOT_SENT = Counter(
    "vouch_provider_not_sent",
    "Provider calls not sent: no room in their rate budgets within their wait, by endpoint and "
    "priority.",
    ["endpoint", "priority"],
)


def operation_of(request: Callable[..., Any]) -> str:
    """The adapter operation that made a request: the method of `StripeProvider` whose closure it
    is (`StripeProvider.refund_create.<locals>.<lambda>` -> `refund_create`). A bounded label."""
    parts = getattr(request, "__qualname__", "").split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "StripeProvider" else "other"


def provider_call_observe(*, operation: str, outcome: str, attempts: int, seconds: float) -> None:
    """Count one call. Never raises: a metric that cannot be written (its folder gone, the disk
    full) must not turn a provider's answer, perhaps about money, into an error."""
    try:
        PROVIDER_CALLS.labels(operation, outcome).inc()
        PROVIDER_ATTEMPTS.labels(operation).inc(attempts)
        PROVIDER_CALL_SECONDS.labels(operation, outcome).observe(seconds)
    except Exception:
        logger.exception("provider call metrics not written")


def budget_wait_observe(*, endpoint: str, priority: str, seconds: float | None) -> None:
    """Count one request's wait for its slots (`seconds` None: it found none and was not sent).
    Never raises, as above."""
    try:
        if seconds is None:
            PROVIDER_NOT_SENT.labels(endpoint, priority).inc()
        else:
            PROVIDER_BUDGET_WAIT_SECONDS.labels(endpoint, priority).observe(seconds)
    except Exception:
        logger.exception("provider budget metrics not written")
