"""The Stripe adapter: the only package that imports the `stripe` SDK, one module per concern —
`client` (StripeProvider, its operations, retries and webhook check), `failures` (how an error is
read, the retry policy), `limits` (Stripe's rate limits as shared budgets, each operation's
endpoint), `pages` (lists a page at a time), `references` (a refund's reference at the card
network), `transport` (the HTTP client under the SDK), `configured` (the provider the settings
describe). Callers import from here."""

from providers.stripe_provider.client import (
    DEFAULT_API_BASE,
    IDEMPOTENCY_KEY_TTL,
    StripeProvider,
)
from providers.stripe_provider.configured import (
    provider_from_settings,
    retry_budget_from_settings,
)
from providers.stripe_provider.failures import RetryPolicy, classify
from providers.stripe_provider.limits import Limits, endpoint_of, limits_from_settings
from providers.stripe_provider.pages import LIST_KINDS, Page
from providers.stripe_provider.references import RefundReference, refund_reference_of
from providers.stripe_provider.transport import _RequestsClient

__all__ = [
    "DEFAULT_API_BASE",
    "IDEMPOTENCY_KEY_TTL",
    "LIST_KINDS",
    "Limits",
    "Page",
    "RefundReference",
    "RetryPolicy",
    "StripeProvider",
    "_RequestsClient",  # bench/reconciliation.py times its requests
    "classify",
    "endpoint_of",
    "limits_from_settings",
    "provider_from_settings",
    "refund_reference_of",
    "retry_budget_from_settings",
]
