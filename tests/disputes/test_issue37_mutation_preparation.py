"""Issue 37's mutation round for disputes/services/preparation.py (bench/MUTATION.md): what a
drafter is shown of a refund made in Stripe's Dashboard and recorded by a four-eyes adjustment
(`recorded_refunds`), value by value, and which recorded refunds count at all."""

from __future__ import annotations

from typing import Any

import stripe
from django.utils import timezone

from disputes.drafting import ReceiptFact
from disputes.services.preparation import material_for, recorded_refunds
from envelopes.models import Adjustment
from receipts.models import Receipt
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import World
from tests.drivers.disputes37 import record_dashboard_refund


def test_a_recorded_refund_is_shown_to_the_drafter_as_stripe_showed_it_at_approval(
    world: World, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund(10_000_000)
    adjustment = record_dashboard_refund(world, sdk, amount_cents=300)
    read = adjustment.approval_read
    assert read is not None
    dispute = world.dispute(reason="product_not_received", amount_cents=1000)

    expected = ReceiptFact(
        id=adjustment.public_id,
        kind="foreign_refund",
        amount_micro=3_000_000,
        provider_object_id=adjustment.provider_object_id,
        detail={
            "id": adjustment.provider_object_id,
            "status": "succeeded",
            "provider_read": read.public_id,
            "provider_read_sha256": read.sha256,
        },
    )
    assert recorded_refunds(world.charge_id) == [expected]
    material = material_for(dispute)
    assert material.refund_receipts == [expected]  # the charge made no refund receipt of its own
    assert material.charge_receipt is not None
    assert material.charge_receipt.provider_object_id == world.charge_id
    # Another charge's recorded refunds are not this one's.
    assert recorded_refunds("ch_another") == []


def test_a_recorded_refund_stripe_showed_without_a_status_is_shown_with_none_invented(
    world: World, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund(10_000_000)
    adjustment = record_dashboard_refund(world, sdk, amount_cents=300)
    shown = dict(adjustment.provider_object)
    shown.pop("status")
    Adjustment.objects.filter(pk=adjustment.pk).update(provider_object=shown)
    (fact,) = recorded_refunds(world.charge_id)
    assert fact.detail["status"] == ""


def test_a_recorded_refund_given_back_since_no_longer_counts(
    world: World, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund(10_000_000)
    first = record_dashboard_refund(world, sdk, amount_cents=300)
    second = record_dashboard_refund(world, sdk, amount_cents=200)
    assert [f.id for f in recorded_refunds(world.charge_id)] == [first.public_id, second.public_id]
    Adjustment.objects.filter(pk=first.pk).update(released_at=timezone.now())
    assert [f.id for f in recorded_refunds(world.charge_id)] == [second.public_id]


def test_a_charge_receipt_no_longer_trusted_is_not_shown_to_the_drafter(
    world: World, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    world.fund(10_000_000)
    dispute = world.dispute(reason="product_not_received", amount_cents=1000)
    charge = Receipt.objects.get(kind="charge", provider_object_id=world.charge_id)
    assert material_for(dispute).charge_receipt is not None
    settings.RECEIPT_TRUSTED_KEYS = {
        k: v for k, v in settings.RECEIPT_TRUSTED_KEYS.items() if k != charge.key_id
    }
    material = material_for(dispute)
    assert material.charge_receipt is None
    assert material.tree_complete is False
