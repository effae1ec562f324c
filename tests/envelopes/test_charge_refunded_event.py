"""`charge.refunded` reads the charge's refunds by listing them (issue 36, item 4): Stripe stopped
including `charge.refunds` unless expanded (API 2022-11-15), and an embedded list held only the
newest ten anyway. A Vouch refund that failed among older refunds is released all the same."""

import json
from typing import Any

import pytest
import stripe

from envelopes.models import Envelope, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import ProviderEvent
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    assert ProviderEvent.objects.get(pk=stored.pk).processed_at is not None


def test_a_failed_vouch_refund_older_than_ten_others_is_released(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    refunded = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}
    )
    assert refunded.status_code == 200, refunded.content
    leg = RefundLeg.objects.get()
    for _ in range(11):  # as in the Dashboard: eleven newer refunds of a cent
        sdk.v1.refunds.create(params={"charge": charge, "amount": 1})
    sandbox.set_refund_status(leg.provider_refund_id, "failed", failure_reason="declined")
    latest = sdk.v1.events.list(params={"type": "charge.refunded", "limit": 1}).data[0]
    _deliver(latest.to_dict())
    leg.refresh_from_db()
    assert leg.released
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert envelope.unspent_micro == 5_000_000  # the failed $1.00 is the buyer's again
    assert ledger_breaches() == []
