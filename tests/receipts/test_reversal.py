"""A verified refund that the provider later reports failed or canceled gives a `refund_reversal`
receipt whose parent is the refund's receipt (SPEC §8); the tree reports the refund reversed and
no longer counts it as sent."""

import json
from typing import Any

import pytest

from envelopes import services as envelope_services
from envelopes.models import Envelope, RefundLeg
from receipts.models import Receipt
from receipts.selectors import receipt_tree, receipt_verify
from stripe_sandbox.client import SandboxControl
from verification.services import provider_event_process, provider_event_store

from .conftest import Shop, refund_receipt

pytestmark = pytest.mark.django_db


def _event(event_id: str, event_type: str, refund_id: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": event_type,
        "created": 1,
        "data": {"object": {"id": refund_id, "object": "refund"}},
    }


def test_a_failed_refund_after_verified_gets_a_reversal_receipt(
    shop: Shop, sandbox: SandboxControl
) -> None:
    charge_id = shop.fund(10_000_000)
    shop.refund(3_000_000)
    shop.refund(1_000_000)
    failed, kept = RefundLeg.objects.order_by("id")
    refund = refund_receipt(failed)
    assert receipt_tree(charge_id=charge_id).unreversed_refunded_micro() == 4_000_000

    sandbox.set_refund_status(failed.provider_refund_id, "failed", "expired_or_canceled_card")
    event = _event("evt_rf_1", "refund.failed", failed.provider_refund_id)
    for _ in range(2):  # two observers of one failure: one release, one reversal
        envelope_services.refund_leg_on_provider_event(event=event)

    reversal = Receipt.objects.get(kind="refund_reversal")
    assert reversal.parent == refund
    assert (reversal.provider_object_id, reversal.charge_id) == (
        refund.provider_object_id,
        charge_id,
    )
    assert reversal.amount_micro == 3_000_000
    assert reversal.verification_run == failed.verification_run
    assert reversal.body["detail"]["status"] == "failed"
    assert reversal.body["detail"]["failure_reason"] == "expired_or_canceled_card"
    assert reversal.body["reason"] == "provider reports failed"
    assert receipt_verify(reversal).ok

    tree = receipt_tree(charge_id=charge_id)
    assert tree.complete, tree.problems
    assert tree.reversed_refund_ids == frozenset({refund.id})
    assert [check.receipt for check in tree.unreversed_refunds()] == [refund_receipt(kept)]
    assert tree.unreversed_refunded_micro() == 1_000_000
    assert [check.receipt for check in tree.reversals] == [reversal]
    envelope = Envelope.objects.get(public_id=shop.envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (1_000_000, 9_000_000)


def test_a_canceled_refund_through_the_webhook_path_gets_a_reversal_receipt(
    shop: Shop, sandbox: SandboxControl
) -> None:
    charge_id = shop.fund(5_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    refund = refund_receipt(leg)
    # A succeeded refund is canceled by way of `pending`, as the card network would.
    sandbox.set_refund_status(leg.provider_refund_id, "pending")
    sandbox.set_refund_status(leg.provider_refund_id, "canceled")
    event = _event("evt_rc_1", "refund.updated", leg.provider_refund_id)
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)

    reversal = Receipt.objects.get(kind="refund_reversal")
    assert reversal.parent == refund
    assert reversal.body["detail"]["status"] == "canceled"
    tree = receipt_tree(charge_id=charge_id)
    assert tree.complete, tree.problems
    assert tree.reversed_refund_ids == frozenset({refund.id})
    assert tree.unreversed_refunds() == []
    assert tree.unreversed_refunded_micro() == 0


def test_a_refund_that_fails_before_it_is_verified_gets_no_receipt(
    shop: Shop, sandbox: SandboxControl
) -> None:
    charge_id = shop.fund(5_000_000)
    shop.refund(2_000_000, settle=False)
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "declined")
    envelope_services.refund_leg_on_provider_event(
        event=_event("evt_rf_2", "refund.failed", leg.provider_refund_id)
    )
    leg.refresh_from_db()
    assert leg.released
    assert not Receipt.objects.filter(kind__in=["refund", "refund_reversal"]).exists()
    tree = receipt_tree(charge_id=charge_id)
    assert tree.charge is not None
    assert (tree.refunds, tree.missing_refund_receipts, tree.undecided_refund_legs) == ([], [], [])
    assert tree.complete  # the money came back: nothing was sent


def test_a_reversed_refund_whose_receipt_waited_for_its_charge(
    shop: Shop, sandbox: SandboxControl
) -> None:
    """The refund was verified and then failed while its charge had no receipt yet: when the
    charge's receipt comes, the refund's and its reversal's are written, and the tree says the
    reversal carries no native detail (the provider's object of that moment was not kept)."""
    from datetime import timedelta

    from django.utils import timezone

    from verification.models import VerificationRun
    from verification.services import run_attempt, runs_claim_due

    charge_id = shop.fund(5_000_000, settle=False)
    shop.refund(2_000_000, settle=False)
    leg = RefundLeg.objects.get()
    assert leg.verification_run is not None
    VerificationRun.objects.filter(contract_id="stripe.charge.succeeded").update(
        next_attempt_at=timezone.now() + timedelta(hours=1)
    )
    VerificationRun.objects.filter(pk=leg.verification_run.pk).update(
        next_attempt_at=timezone.now()
    )
    for run_id, token in runs_claim_due(limit=10):
        run_attempt(run_id=run_id, token=token, trigger="poll")
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "declined")
    envelope_services.refund_leg_on_provider_event(
        event=_event("evt_rf_3", "refund.failed", leg.provider_refund_id)
    )
    assert not Receipt.objects.exists()

    from tests.helpers import settle_runs

    settle_runs()
    tree = receipt_tree(charge_id=charge_id)
    [refund] = tree.refunds
    assert refund.ok
    assert tree.reversed_refund_ids == frozenset({refund.receipt.id})
    assert tree.unreversed_refunded_micro() == 0
    [reversal] = tree.reversals
    assert reversal.problem == "detail_missing"
    assert not tree.complete


def test_a_release_that_overtook_the_verdict_still_gets_its_reversal(shop: Shop) -> None:
    """A `refund.failed` noticed (and the leg released) before the run's readback, which still saw
    the refund succeeded: the run is VERIFIED, its receipt written, and the reversal with it."""
    charge_id = shop.fund(5_000_000)
    shop.refund(2_000_000, settle=False)
    leg = RefundLeg.objects.get()
    assert envelope_services.refund_leg_release(leg=leg, reason="provider reports failed")
    assert not Receipt.objects.filter(kind="refund_reversal").exists()  # nothing to reverse yet
    from tests.helpers import settle_runs

    assert set(settle_runs().values()) == {"VERIFIED"}
    refund = refund_receipt(leg)
    reversal = Receipt.objects.get(kind="refund_reversal")
    assert reversal.parent == refund
    tree = receipt_tree(charge_id=charge_id)
    assert tree.reversed_refund_ids == frozenset({refund.id})
    assert tree.unreversed_refunded_micro() == 0
    assert tree.missing_refund_receipts == []
    assert tree.problems == [f"{reversal.id}: detail_missing"]
