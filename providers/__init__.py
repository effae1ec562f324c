"""Vouch's one door to payment providers. `providers.stripe_provider` is the only module in Vouch
that imports the `stripe` SDK; everything else talks to it through the narrow operations of
`StripeProvider` and gets typed `Outcome`s back."""

from providers.outcomes import Outcome, OutcomeKind, ProviderUnavailable, WebhookSignatureError
from providers.stripe_provider import (
    IDEMPOTENCY_KEY_TTL,
    LIST_KINDS,
    Page,
    RefundReference,
    StripeProvider,
    provider_from_settings,
    refund_reference_of,
)

__all__ = [
    "IDEMPOTENCY_KEY_TTL",
    "LIST_KINDS",
    "Outcome",
    "OutcomeKind",
    "Page",
    "ProviderUnavailable",
    "RefundReference",
    "StripeProvider",
    "WebhookSignatureError",
    "provider_from_settings",
    "refund_reference_of",
]
