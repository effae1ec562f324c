"""The provider as the deployment configures it (settings.STRIPE_*), one per process and
configuration."""

from __future__ import annotations

from typing import Any

from providers.stripe_provider.client import StripeProvider
from providers.stripe_provider.failures import RetryPolicy
from providers.stripe_provider.limits import limits_from_settings

_cached: dict[tuple[Any, ...], StripeProvider] = {}


def provider_from_settings() -> StripeProvider:
    """The provider as the deployment configures it (settings.STRIPE_*): one per process and
    configuration, so its HTTP connections are kept alive (the SDK's sessions are per thread)."""
    from django.conf import settings

    config = (
        settings.STRIPE_API_KEY,
        settings.STRIPE_API_BASE,
        settings.STRIPE_CONNECT_TIMEOUT_S,
        settings.STRIPE_READ_TIMEOUT_S,
        settings.STRIPE_MAX_ATTEMPTS,
        settings.STRIPE_RETRY_BASE_S,
        settings.STRIPE_RETRY_MAX_S,
        limits_from_settings(settings),
    )
    provider = _cached.get(config)
    if provider is None:
        provider = _cached[config] = _build(settings)
    return provider


def retry_budget_from_settings() -> float:
    """The configured provider's `retry_budget_s`: what one call can take, retries included."""
    return provider_from_settings().retry_budget_s


def _build(settings: Any) -> StripeProvider:
    return StripeProvider(
        api_key=settings.STRIPE_API_KEY,
        api_base=settings.STRIPE_API_BASE,
        connect_timeout_s=settings.STRIPE_CONNECT_TIMEOUT_S,
        read_timeout_s=settings.STRIPE_READ_TIMEOUT_S,
        retry=RetryPolicy(
            max_attempts=settings.STRIPE_MAX_ATTEMPTS,
            base_delay_s=settings.STRIPE_RETRY_BASE_S,
            max_delay_s=settings.STRIPE_RETRY_MAX_S,
        ),
        limits=limits_from_settings(settings),
    )
