"""Issue 37's mutation bullet for the money under review on the buyer's refund form
(envelopes/selectors/buyer.py: `money_under_review`, `_refuse_money_under_review`,
`refund_review_check`; bench/mutation/envelopes.selectors.buyer.toml): Dashboard refunds on two
payments of one envelope, or of a whole payment, each opened as `refund_foreign` by its event,
refuse a refund that would take that money, naming each payment, and say how much can be refunded
now (or that nothing can)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import stripe

from envelopes.models import Envelope
from envelopes.selectors.buyer import (
    RefundUnderReview,
    buyer_refund_preview,
    money_under_review,
    refund_review_check,
    under_review_register,
)
from reconciliation.events import foreign_refunds_under_review
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db

DOLLAR = 1_000_000


def _deliver_refund_events(sdk: stripe.StripeClient, count: int) -> None:
    listed = sdk.v1.events.list(params={"type": "charge.refunded", "limit": count}).data
    for event in [e.to_dict() for e in listed]:
        stored, _ = provider_event_store(event=event, raw=json.dumps(event))
        provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)


def _two_payments(alice: Api) -> tuple[str, str, str]:
    data = alice.create(2 * DOLLAR)
    top_up = alice.top_up(data["envelope_id"], 3 * DOLLAR)
    charge = next(leg["charge"] for leg in top_up["funding_legs"] if leg["kind"] == "top_up")
    return data["envelope_id"], data["funding_legs"][0]["charge"], charge


def _refused(envelope_id: str, amount_micro: int | None) -> Any:
    envelope = Envelope.objects.get(public_id=envelope_id)
    with pytest.raises(RefundUnderReview) as refused:
        buyer_refund_preview(envelope=envelope, amount_micro=amount_micro)
    with pytest.raises(RefundUnderReview):
        refund_review_check(envelope=envelope, amount_micro=amount_micro)
    return refused.value


def test_money_under_review_on_two_payments_names_both_and_what_is_left(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, original, top_up = _two_payments(alice)
    sdk.v1.refunds.create(params={"charge": original, "amount": 100})  # the Dashboard
    sdk.v1.refunds.create(params={"charge": top_up, "amount": 50})
    _deliver_refund_events(sdk, 2)

    assert money_under_review([original, top_up, ""]) == {
        original: 1 * DOLLAR,
        top_up: DOLLAR // 2,
    }
    assert money_under_review([""]) == {}
    # Registered again (an app's ready() run twice): still counted once.
    under_review_register(foreign_refunds_under_review)
    assert money_under_review([original]) == {original: 1 * DOLLAR}

    refused = _refused(envelope_id, None)  # everything: $5.00
    assert refused.details == {
        "under_review_micro": {top_up: DOLLAR // 2, original: 1 * DOLLAR},
        # Newest first: the top-up's $2.50 not under review, then its $0.50 under review stops
        # it (not $3.50, the sum over both payments, which a refund can never reach).
        "refundable_micro": 2_500_000,
    }
    assert refused.message.startswith(
        "Nothing was refunded: $1.00 of the original payment and $0.50 of the top-up #1 were "
        "refunded outside Vouch and are being reviewed"
    )
    assert refused.message.endswith("so up to $2.50 can be refunded now.")

    # What is not under review on either payment can be refunded: $2.50 of the top-up alone.
    envelope = Envelope.objects.get(public_id=envelope_id)
    refund_review_check(envelope=envelope, amount_micro=2_500_000)
    assert buyer_refund_preview(envelope=envelope, amount_micro=2_500_000).total_micro == 2_500_000


def test_the_amount_a_refusal_says_can_be_refunded_now_is_not_refused(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, original, top_up = _two_payments(alice)
    sdk.v1.refunds.create(params={"charge": original, "amount": 100})  # the Dashboard
    sdk.v1.refunds.create(params={"charge": top_up, "amount": 50})
    _deliver_refund_events(sdk, 2)
    said = _refused(envelope_id, None).details["refundable_micro"]

    envelope = Envelope.objects.get(public_id=envelope_id)
    # The refund takes the top-up first: its $2.50 not under review, then it would reach the
    # $0.50 under review on it. $2.50 is what can be refunded now, and is not refused (it said
    # $3.50, refused again, before the fix).
    assert said == 2_500_000
    refund_review_check(envelope=envelope, amount_micro=said)


def test_a_payment_refunded_whole_outside_vouch_leaves_nothing_to_refund_now(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(2 * DOLLAR)
    charge = data["funding_legs"][0]["charge"]
    sdk.v1.refunds.create(params={"charge": charge})  # the Dashboard, all of it
    _deliver_refund_events(sdk, 1)

    refused = _refused(data["envelope_id"], 1 * DOLLAR)
    assert refused.details == {"under_review_micro": {charge: 2 * DOLLAR}, "refundable_micro": 0}
    assert "$2.00 of the original payment was refunded outside Vouch and is being reviewed" in (
        refused.message
    )
    assert refused.message.endswith("so nothing can be refunded now.")


def test_a_refund_that_leaves_the_reviewed_payment_alone_is_not_refused(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, original, _ = _two_payments(alice)
    sdk.v1.refunds.create(params={"charge": original})  # the Dashboard: all of the original
    _deliver_refund_events(sdk, 1)
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert money_under_review([original]) == {original: 2 * DOLLAR}

    # $1.00 comes from the top-up alone (newest first): nothing under review is touched.
    refund_review_check(envelope=envelope, amount_micro=1 * DOLLAR)
    assert buyer_refund_preview(envelope=envelope, amount_micro=1 * DOLLAR).total_micro == DOLLAR
