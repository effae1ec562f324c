"""Issue 37, item 8 (SPEC §7, §15.2, §10.1): a refund made in the Stripe Dashboard is known to
Vouch when Stripe's event about it is processed, not at the next hourly run. The `charge.refunded`
(or `refund.created`) event compares that one charge's refunds with the ledger as a sweep does:
the provider's read is stored as an observation and the `refund_foreign` discrepancy opens at
once, with its money escalation. The buyer's page and the refund form say in words that the money
is under review, and a refund of it is refused with `refund_under_review`, not sent to Stripe to be
refused there ("more than the payment has left to refund")."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
import stripe

from envelopes.models import Envelope, RefundOperation
from reconciliation.models import Discrepancy, Observation, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import EscalationStatus, ProviderEvent
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db

KEY = re.compile(r'name="key" value="([^"]+)"')


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    assert ProviderEvent.objects.get(pk=stored.pk).processed_at is not None


def _latest(sdk: stripe.StripeClient, event_type: str) -> dict[str, Any]:
    return sdk.v1.events.list(params={"type": event_type, "limit": 1}).data[0].to_dict()


def _text(response: Any) -> str:
    page = response.content.decode()
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)).replace(" :", ":"))


def _form(alice: Api, envelope_id: str, step: str, amount: str | None = None) -> Any:
    path = f"/escrow/envelopes/{envelope_id}/refund/"
    key = KEY.search(alice.client.get(path).content.decode()).group(1)
    data = {"csrfmiddlewaretoken": alice.csrf, "key": key, "step": step, "choice": "everything"}
    if amount is not None:
        data.update(choice="amount", amount=amount)
    return alice.client.post(path, data)


def test_a_dashboard_refund_opens_its_discrepancy_when_the_event_comes_and_the_buyer_is_told(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    foreign = sdk.v1.refunds.create(params={"charge": charge, "amount": 500})  # the Dashboard

    _deliver(_latest(sdk, "charge.refunded"))

    # No sweep ran: the event alone opened it.
    assert not Run.objects.exclude(kind="catch_up").exists()
    discrepancy = Discrepancy.objects.get(code="refund_foreign")
    assert (discrepancy.subject_id, discrepancy.charge_id) == (foreign.id, charge)
    assert discrepancy.is_open
    assert discrepancy.amount_micro == 5_000_000
    assert discrepancy.escalation is not None
    assert discrepancy.escalation.status == EscalationStatus.OPEN
    observation = discrepancy.observation
    assert observation is not None
    assert Observation.objects.filter(run=discrepancy.first_run).exists()
    assert [r["id"] for r in observation.listed()] == [foreign.id]
    # The same event again (or refund.created for the same refund) opens nothing new.
    _deliver(_latest(sdk, "refund.created"))
    assert Discrepancy.objects.filter(code="refund_foreign").count() == 1
    assert Discrepancy.objects.get().seen_count == 2

    page = _text(alice.client.get(f"/escrow/envelopes/{envelope_id}/"))
    assert (
        "$5.00 of this payment was refunded outside Vouch and is being reviewed by a person at "
        "Vouch" in page
    )

    preview = _form(alice, envelope_id, "preview")
    assert preview.status_code == 422
    assert 'data-code="refund_under_review"' in preview.content.decode()
    said = _text(preview)
    assert "$5.00 of the original payment was refunded outside Vouch" in said
    assert "cannot be refunded again while it is reviewed" in said

    confirmed = _form(alice, envelope_id, "confirm")
    assert confirmed.status_code == 422
    assert 'data-code="refund_under_review"' in confirmed.content.decode()
    assert not RefundOperation.objects.exists()  # nothing was sent to Stripe
    assert Envelope.objects.get().unspent_micro == 5_000_000


def test_money_not_under_review_can_still_be_refunded(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    alice.top_up(envelope_id, 3_000_000)
    sdk.v1.refunds.create(params={"charge": charge, "amount": 200})  # $2 of the original
    _deliver(_latest(sdk, "charge.refunded"))
    assert Discrepancy.objects.get(code="refund_foreign").is_open

    # $3 of the top-up and $3 of the original's $5: the $2 under review stays out of it.
    assert _form(alice, envelope_id, "preview", "6.00").status_code == 200
    refused = _form(alice, envelope_id, "preview")  # everything: $8, the $2 included
    assert refused.status_code == 422
    assert "up to $6.00 can be refunded now" in _text(refused)
