"""Stripe's published rate limits (https://docs.stripe.com/rate-limits) as budgets of
`core.budget`, and the endpoint each operation of `StripeProvider` calls
(docs/decisions/0018-one-budget-per-stripe-limit.md).

Stripe counts each named API operation as its own endpoint (`POST /v1/refunds` is one,
`GET /v1/refunds/{id}` another), each at 25 requests a second unless stated, inside a global limit
per account: 100 a second in live mode, 25 in a sandbox. The Files API allows 20 reads and 20
writes a second; the Search API 20 reads a second for all search endpoints together. Every call
takes one slot of the global budget and one of its endpoint's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core.budget import CallBudget, Priority, slots_penalize, slots_take
from core.timing import provider_wait
from providers.metrics import budget_wait_observe

LIVE_GLOBAL_RPS = 100.0
SANDBOX_GLOBAL_RPS = 25.0

GLOBAL = "stripe:global"
SEARCH = "stripe:search"  # every search endpoint together
FILES_WRITE = "stripe:files:write"
FILES_READ = "stripe:files:read"

# Each operation of StripeProvider that calls Stripe -> its endpoint, as Stripe counts it.
# `{kind}`: the list `list_pages` reads (refunds, charges, disputes, events).
ENDPOINTS: dict[str, str] = {
    "payment_create": "POST /v1/payment_intents",
    "payment_intent_read": "GET /v1/payment_intents/{id}",
    "payment_intents_with_metadata": "GET /v1/payment_intents/search",
    "payment_intent_pages_with_metadata": "GET /v1/payment_intents/search",
    "charge_read": "GET /v1/charges/{id}",
    "refund_create": "POST /v1/refunds",
    "refund_read": "GET /v1/refunds/{id}",
    "refunds_of_charge": "GET /v1/refunds",
    "refund_pages_of_charge": "GET /v1/refunds",
    "dispute_read": "GET /v1/disputes/{id}",
    "dispute_submit_manually": "POST /v1/disputes/{id}",
    "dispute_file": "POST /v1/disputes/{id}",
    "file_upload": "POST /v1/files",
    "list_pages": "GET /v1/{kind}",
}
# Operations that never call Stripe.
LOCAL_OPERATIONS = frozenset({"webhook_verify"})


def endpoint_of(operation: str, kind: str | None = None) -> str:
    """The endpoint an operation calls ("other" for a request no operation names: a test's)."""
    endpoint = ENDPOINTS.get(operation, "other")
    return endpoint.replace("{kind}", kind or "other") if "{kind}" in endpoint else endpoint


def global_rps_for_key(api_key: str) -> float:
    """The global limit of the key's mode: live keys 100 a second, test-mode keys 25."""
    return LIVE_GLOBAL_RPS if api_key.startswith(("sk_live_", "rk_live_")) else SANDBOX_GLOBAL_RPS


@dataclass(frozen=True)
class Limits:
    """The limits one Stripe account enforces, as Vouch spends them: spacing `(1 + margin) /
    limit`, so 99.5% of each with the default margin."""

    global_rps: float
    endpoint_rps: float = 25.0
    files_rps: float = 20.0
    search_rps: float = 20.0
    margin: float = 0.005

    def budgets_for(self, endpoint: str) -> tuple[CallBudget, ...]:
        """The global budget and the endpoint's (Files and Search as Stripe groups them)."""
        if endpoint.startswith("GET ") and endpoint.endswith("/search"):
            name, rps = SEARCH, self.search_rps
        elif endpoint.startswith("POST /v1/files"):
            name, rps = FILES_WRITE, self.files_rps
        elif endpoint.startswith("GET /v1/files"):
            name, rps = FILES_READ, self.files_rps
        else:
            name, rps = f"stripe:{endpoint}", self.endpoint_rps
        return (
            CallBudget(GLOBAL, self.global_rps, margin=self.margin),
            CallBudget(name, rps, margin=self.margin),
        )

    def global_budget(self) -> CallBudget:
        return CallBudget(GLOBAL, self.global_rps, margin=self.margin)


def limits_from_settings(settings: Any) -> Limits | None:
    """Stripe's limits as the deployment sets them (STRIPE_RATE_LIMITS "auto"), or None ("off":
    no budget, nothing written)."""
    mode = str(settings.STRIPE_RATE_LIMITS).strip().lower()
    if mode == "off":
        return None
    if mode != "auto":
        raise ValueError(
            f'STRIPE_RATE_LIMITS is "auto" or "off", not {settings.STRIPE_RATE_LIMITS!r}'
        )
    chosen = settings.STRIPE_GLOBAL_RPS
    return Limits(
        global_rps=float(chosen) if chosen else global_rps_for_key(settings.STRIPE_API_KEY),
        endpoint_rps=float(settings.STRIPE_ENDPOINT_RPS),
        files_rps=float(settings.STRIPE_FILES_RPS),
        search_rps=float(settings.STRIPE_SEARCH_RPS),
        margin=float(settings.STRIPE_BUDGET_MARGIN),
    )


class CallSlots:
    """The budgets one call takes a slot of before each attempt: Stripe's global one and its
    endpoint's (if limits are on), and the caller's lane (if capped), at the call's priority."""

    def __init__(
        self,
        *,
        endpoint: str,
        priority: Priority,
        limit_budgets: tuple[CallBudget, ...],
        lane: CallBudget | None,
    ) -> None:
        self.endpoint = endpoint
        self.priority = priority
        self.limit_budgets = limit_budgets
        self.budgets = limit_budgets + ((lane,) if lane is not None and lane.limited else ())

    @classmethod
    def of(
        cls, *, endpoint: str, limits: Limits | None, lane: CallBudget | None, writes: bool
    ) -> CallSlots:
        if writes:
            priority = Priority.MONEY
        elif lane is not None:
            priority = lane.lane or Priority.READBACK
        else:
            priority = Priority.PERSON
        limit_budgets = limits.budgets_for(endpoint) if limits is not None else ()
        return cls(endpoint=endpoint, priority=priority, limit_budgets=limit_budgets, lane=lane)

    def take(self) -> bool:
        """One slot of each budget (True), or none within the wait (False). Nothing to take: True,
        and nothing is written."""
        if not self.budgets:
            return True
        wait_s = None  # the context's: a web request's short wait, a worker task's long one
        if self.priority in (Priority.READBACK, Priority.RECONCILE):
            # A lane's reads run in workers and commands, often on threads of their own (a
            # reconciliation run reads the next page ahead), which the context does not reach,
            # and they only take free room: they wait STRIPE_BUDGET_LANE_WAIT_S wherever they
            # run, never so long that they hold a worker process while money drains (issue 40).
            wait_s = float(settings.STRIPE_BUDGET_LANE_WAIT_S)
        with provider_wait():  # waiting for room is waiting for the provider too
            waited = slots_take(self.budgets, priority=self.priority, wait_s=wait_s)
        budget_wait_observe(endpoint=self.endpoint, priority=self.priority, seconds=waited)
        return waited is not None

    def penalize(self, reason: str | None, seconds: float) -> None:
        """A 429: hold off what Stripe says it limited (`Stripe-Rate-Limited-Reason`:
        `global-…` the global budget, `endpoint-…` the endpoint's; neither, both). With Stripe's
        limits off, the lane holds off instead."""
        if not self.limit_budgets:
            slots_penalize(self.budgets, seconds)
            return
        global_budget, endpoint_budget = self.limit_budgets
        reason = (reason or "").lower()
        if reason.startswith("global"):
            named: tuple[CallBudget, ...] = (global_budget,)
        elif reason.startswith("endpoint"):
            named = (endpoint_budget,)
        else:
            named = self.limit_budgets
        slots_penalize(named, seconds)
