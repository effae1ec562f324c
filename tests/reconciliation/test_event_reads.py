"""Issue 40: Stripe's rate limits make every read count. The events of a refund Vouch made itself
(`refund.created` naming one of its legs, `charge.refunded` showing no more refunded than Vouch
counts) need no read of the charge: two reads per refund, at 25 a second, tripled the reads of a
busy hour and held verdicts back for minutes. A refund nobody here made is still read and
compared at once."""

from __future__ import annotations

import json
from typing import Any

import pytest
import stripe

from reconciliation.models import Discrepancy, DiscrepancyClass
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db

CHARGE_READ = "GET /v1/charges/{id}"


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)


def _latest(sdk: stripe.StripeClient, event_type: str) -> dict[str, Any]:
    return sdk.v1.events.list(params={"type": event_type, "limit": 1}).data[0].to_dict()


def _charge_reads(sandbox: SandboxControl) -> int:
    return int(sandbox.state()["requests"].get(CHARGE_READ, 0))


def test_the_events_of_vouchs_own_refund_read_nothing(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 200, response.content
    events = [_latest(sdk, "charge.refunded"), _latest(sdk, "refund.created")]
    before = _charge_reads(stripe_at_sandbox)

    for event in events:
        _deliver(event)

    assert _charge_reads(stripe_at_sandbox) == before
    assert not Discrepancy.objects.exists()


def test_a_dashboard_refund_is_still_read_and_compared_at_once(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope = alice.create(5_000_000)
    charge = envelope["funding_legs"][0]["charge"]
    sdk.v1.refunds.create(params={"charge": charge, "amount": 100})  # made outside Vouch
    before = _charge_reads(stripe_at_sandbox)

    _deliver(_latest(sdk, "refund.created"))

    assert _charge_reads(stripe_at_sandbox) == before + 1
    assert Discrepancy.objects.filter(code=DiscrepancyClass.REFUND_FOREIGN).count() == 1
