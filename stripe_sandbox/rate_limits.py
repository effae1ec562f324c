"""Stripe's documented rate limits, enforced in front of every API route (README: *Rate limits*).

The figures are https://docs.stripe.com/rate-limits's: per account and per mode of the API key,
100 requests a second in live mode and 25 in a sandbox; 25 a second for each endpoint (a method
and a route pattern: `GET /v1/refunds/{id}` is one endpoint whatever the id) unless stated; the
Files API 20 read and 20 write requests a second; the Search API 20 read requests a second; 1,000
update requests per PaymentIntent an hour. Every request counts against the global limit and each
limit of its own.

The algorithm is the token bucket of Stripe's "Scaling your API with rate limiters"
(https://stripe.com/blog/rate-limiters): each limit is a bucket holding one second of its rate
(one hour for the PaymentIntent limit), refilled continuously at that rate. A request takes a
token from every bucket it counts against, or from none: refused, it takes nothing, so a client
pacing itself evenly below a limit is never refused, and one sending above it is refused the
excess. Time is the process's monotonic clock, never the sandbox clock a test moves."""

from __future__ import annotations

import threading
import time
from typing import Any

from stripe_sandbox.errors import StripeError

# Stripe's figures (https://docs.stripe.com/rate-limits), by the names the control route takes.
STRIPE_LIMITS: dict[str, int] = {
    "global_rps_live": 100,
    "global_rps_sandbox": 25,
    "endpoint_rps": 25,
    "files_read_rps": 20,
    "files_write_rps": 20,
    "search_rps": 20,
    "payment_intent_updates_per_hour": 1000,
}

# The values of Stripe's `Stripe-Rate-Limited-Reason` header the sandbox can send (the page lists
# global-rate, endpoint-rate, global-concurrency, endpoint-concurrency and resource-specific; the
# concurrency limiter is not imitated). The Files, Search and PaymentIntent limits are the page's
# limits of a named resource on top of the default endpoint one: resource-specific.
GLOBAL, ENDPOINT, RESOURCE = "global-rate", "endpoint-rate", "resource-specific"

# How long `served` keeps its per-second counts: at least the 15 minutes a bench looks back.
SERVED_KEPT_S = 16 * 60


def rate_limited(reason: str) -> StripeError:
    """Stripe's 429 for a request over a limit, as Stripe answers it (type, code and message as
    recorded from Stripe in the wild, e.g. airbytehq/airbyte's source-stripe tests; `doc_url` from
    the code) with `Stripe-Rate-Limited-Reason`. No `Retry-After` and no `Stripe-Should-Retry`:
    Stripe documents neither on a rate-limited answer, and its client libraries, which retry a 429
    only on `Stripe-Should-Retry: true`, "will retry 429s caused by lock timeouts", "unlike rate
    limiting errors" (the page's *Object lock timeouts*). Refused before any endpoint runs: never
    stored under an idempotency key, so a retry with the key runs."""
    return StripeError(
        429,
        "Request rate limit exceeded. Learn more about rate limits here "
        "https://stripe.com/docs/rate-limits.",
        code="rate_limit",
        stored=False,
        headers={"Stripe-Rate-Limited-Reason": reason},
    )


def key_mode(api_key: str) -> str:
    """The mode of the key's account that Stripe's limits apply to: live or sandbox (test)."""
    return "live" if api_key.startswith(("sk_live_", "rk_live_")) else "sandbox"


class _Bucket:
    __slots__ = ("capacity", "last", "rate", "tokens")

    def __init__(self, capacity: float, rate: float, now: float) -> None:
        self.capacity, self.rate, self.tokens, self.last = capacity, rate, capacity, now

    def refill(self, now: float) -> float:
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        return self.tokens


def _limits_of(endpoint: str) -> list[tuple[str, str]]:
    """The limits an endpoint counts against beyond the global one: (bucket name, reason)."""
    method, pattern = endpoint.split(" ", 1)
    limits = [(f"endpoint_rps {endpoint}", ENDPOINT)]
    if pattern == "/v1/files" or pattern.startswith("/v1/files/"):
        # File contents downloads (files.stripe.com) are not API requests: never reach here.
        limits.append(("files_read_rps" if method == "GET" else "files_write_rps", RESOURCE))
    if pattern.endswith("/search"):
        limits.append(("search_rps", RESOURCE))
    return limits


def is_payment_intent_update(endpoint: str) -> bool:
    """A request that changes an existing PaymentIntent: POST /v1/payment_intents/{id}[/...]
    (update, confirm, cancel, capture...). Creating one is not an update of it."""
    return endpoint.startswith("POST /v1/payment_intents/{id}")


class RateLimits:
    """The sandbox's limiter, its configuration and what it served and refused."""

    def __init__(self, enabled: bool = True) -> None:
        self._lock = threading.Lock()
        self.enabled = enabled
        self.limits = dict(STRIPE_LIMITS)
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._pruned = time.monotonic()
        self._clear_counters()

    def _clear_counters(self) -> None:
        self.refused_total = 0
        self.refused_by_endpoint: dict[str, int] = {}
        self.refused_by_reason: dict[str, int] = {}
        self.served: dict[str, dict[int, int]] = {}
        self._served_second = 0

    # --- the decision ------------------------------------------------------------------------

    def admit(self, mode: str, endpoint: str | None, object_id: str | None = None) -> str | None:
        """Take a token from every bucket the request counts against and answer None, or take
        none and answer the reason of the first limit it is over. `endpoint` is None for a URL
        that is no route (counted against the global limit only)."""
        with self._lock:
            name = endpoint or "unrouted"
            if not self.enabled:
                self._count_served(name)
                return None
            now = time.monotonic()
            wanted: list[tuple[tuple[str, str], float, float, str]] = []
            rps = self.limits[f"global_rps_{mode}"]
            wanted.append((("global", mode), rps, rps, GLOBAL))
            if endpoint is not None:
                for figure, reason in _limits_of(endpoint):
                    rps = self.limits[figure.split(" ", 1)[0]]
                    wanted.append(((figure, mode), rps, rps, reason))
                if object_id is not None and is_payment_intent_update(endpoint):
                    hourly = self.limits["payment_intent_updates_per_hour"]
                    wanted.append(((f"pi {object_id}", mode), hourly, hourly / 3600, RESOURCE))
            buckets = []
            for key, capacity, rate, reason in wanted:
                bucket = self._buckets.get(key)
                if bucket is None:
                    bucket = self._buckets[key] = _Bucket(capacity, rate, now)
                if bucket.refill(now) < 1:
                    self.refused_total += 1
                    self.refused_by_endpoint[name] = self.refused_by_endpoint.get(name, 0) + 1
                    self.refused_by_reason[reason] = self.refused_by_reason.get(reason, 0) + 1
                    return reason
                buckets.append(bucket)
            for bucket in buckets:
                bucket.tokens -= 1
            self._count_served(name)
            if now - self._pruned > 60:
                self._prune(now)
            return None

    def _count_served(self, endpoint: str) -> None:
        second = int(time.time())
        per_second = self.served.setdefault(endpoint, {})
        per_second[second] = per_second.get(second, 0) + 1
        if second != self._served_second:
            self._served_second = second
            oldest = second - SERVED_KEPT_S
            for counts in self.served.values():
                for old in [s for s in counts if s < oldest]:
                    del counts[old]

    def _prune(self, now: float) -> None:
        """Forget buckets that are full again (one per PaymentIntent would otherwise pile up):
        a new bucket starts full, so nothing changes."""
        self._pruned = now
        for key in [k for k, b in self._buckets.items() if b.refill(now) >= b.capacity]:
            del self._buckets[key]

    # --- control -----------------------------------------------------------------------------

    def configure(self, body: dict[str, Any]) -> None:
        """`{"enabled": false}` lifts the limits; `{"enabled": true}` restores Stripe's figures;
        any figure given (STRIPE_LIMITS's names, integers >= 1) overrides that one and enables
        the limits unless `enabled: false` comes with it. Checked whole before anything applies;
        ValueError says what is wrong."""
        unknown = sorted(set(body) - set(STRIPE_LIMITS) - {"enabled"})
        if unknown:
            raise ValueError(f"unknown rate limit fields {unknown}; known: {sorted(STRIPE_LIMITS)}")
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ValueError("enabled must be true or false")
        figures = {name: value for name, value in body.items() if name in STRIPE_LIMITS}
        for name, value in figures.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1")
        with self._lock:
            if body.get("enabled") is True:
                self.limits = dict(STRIPE_LIMITS)
            self.limits.update(figures)
            self.enabled = enabled
            self._buckets.clear()  # new capacities: every bucket starts full

    def reset(self) -> None:
        """Counters cleared and buckets full; the configuration stays."""
        with self._lock:
            self._buckets.clear()
            self._clear_counters()

    def summary(self, *, served: bool = True) -> dict[str, Any]:
        with self._lock:
            answer: dict[str, Any] = {
                "enabled": self.enabled,
                "limits": dict(self.limits),
                "refused": {
                    "total": self.refused_total,
                    "by_endpoint": dict(sorted(self.refused_by_endpoint.items())),
                    "by_reason": dict(sorted(self.refused_by_reason.items())),
                },
            }
            if served:
                answer["served"] = {
                    endpoint: {str(second): n for second, n in sorted(counts.items())}
                    for endpoint, counts in sorted(self.served.items())
                }
            return answer
