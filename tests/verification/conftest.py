import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
import stripe
from django.utils import timezone

from providers import StripeProvider, provider_from_settings
from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge
from verification.models import VerificationRun
from verification.services import provider_event_store, verification_start


@pytest.fixture
def sdk(sandbox: SandboxControl, settings: Any) -> stripe.StripeClient:
    """The SDK on the sandbox; the app's settings point at the same sandbox."""
    settings.STRIPE_API_BASE = sandbox.url
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )


@pytest.fixture
def provider(sdk: stripe.StripeClient) -> StripeProvider:
    return provider_from_settings()


class Refunds:
    """Make refunds at the sandbox the way Vouch does, and start their verification runs."""

    def __init__(self, sdk: stripe.StripeClient, provider: StripeProvider) -> None:
        self.sdk = sdk
        self.provider = provider
        self.count = 0

    def charge(self, amount: int = 10_000) -> str:
        return paid_charge(self.sdk, amount)

    def make(
        self,
        charge: str,
        amount: int = 500,
        *,
        contract: str = "stripe.refund.created",
        started: datetime | None = None,
        input_changes: dict[str, Any] | None = None,
    ) -> VerificationRun:
        self.count += 1
        leg = f"leg_{self.count}"
        key = f"erf_t:{leg}"
        started = started or timezone.now()
        outcome = self.provider.refund_create(
            charge=charge,
            amount_cents=amount,
            idempotency_key=key,
            metadata={"vouch_envelope": "env_t", "vouch_refund": "erf_t", "vouch_leg": leg},
        )
        refund = outcome.require()
        return verification_start(
            contract_id=contract,
            operation_id=key,
            operation_created_at=started,
            input={"charge": charge, "amount": amount, **(input_changes or {})},
            action_result=refund,
        )

    def store_events(self, event_type: str = "refund.created") -> int:
        """Store the sandbox's events of a type as if delivered by webhook."""
        events = self.sdk.v1.events.list(params={"type": event_type, "limit": 100}).data
        for event in events:
            data = event.to_dict()
            provider_event_store(event=data, raw=json.dumps(data))
        return len(events)


@pytest.fixture
def refunds(sdk: stripe.StripeClient, provider: StripeProvider) -> Refunds:
    return Refunds(sdk, provider)


Enqueued = list[tuple[int, str, str]]


@pytest.fixture
def enqueued() -> Enqueued:
    return []


@pytest.fixture
def enqueue(enqueued: Enqueued) -> Callable[[int, str, str], None]:
    """Records what would be sent to a worker (the engine tests run attempts themselves)."""
    return lambda run_id, token, trigger: enqueued.append((run_id, token, trigger))
