"""SPEC §15.4 (issue 24, item 4): a refund made outside Vouch and recorded by an approved
adjustment (unspent -> refunded on its funding leg) is compared like any refund Vouch counts:
its amount and charge against the adjustment's, and — the one automatic correction — when the
provider later shows it `failed` or `canceled`, a run gives its money back to the envelope through
the one release service (once; a dry run only counts what it would release)."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from envelopes.adjustments import adjustment_approve
from envelopes.models import Adjustment, Envelope, FundingLeg, JournalEntry, RefundLeg
from envelopes.selectors import ledger_breaches
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from reconciliation.services import discrepancy_adjustment_propose
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _staff(username: str, *perms: str) -> Any:
    from django.contrib.auth.models import Permission

    from accounts.models import User

    user = User.objects.create_user(username, f"{username}@example.com", "pw-12345-staff")
    user.is_staff = True
    user.save()
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return User.objects.get(pk=user.pk)


def open_classes() -> list[tuple[str, str]]:
    return sorted(Discrepancy.objects.exclude(status="resolved").values_list("code", "subject_id"))


def recorded_foreign_refund(
    alice: Api, sdk: stripe.StripeClient, *, duplicate: bool = False
) -> tuple[FundingLeg, str]:
    """A $10.00 envelope whose charge got a $3.00 Dashboard refund, found by a run and recorded
    by an adjustment one person proposed and another approved. With `duplicate`, the envelope
    has a $2.00 refund leg first, and the Dashboard refund carries that leg's name (recorded on
    the leg)."""
    data = alice.create(10_000_000)
    funding = FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)
    metadata = {}
    if duplicate:
        response = alice.post(
            f"/api/v1/escrow/envelopes/{data['envelope_id']}/refund", {"amount_micro": 2_000_000}
        )
        assert response.status_code == 200, response.content
        metadata = {"vouch_leg": RefundLeg.objects.get().public_id}
    foreign = sdk.v1.refunds.create(
        params={"charge": funding.charge_id, "amount": 300, "metadata": metadata}
    )
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get(code__in=("refund_foreign", "refund_duplicate"))
    adjustment = discrepancy_adjustment_propose(
        discrepancy=discrepancy,
        actor=_staff("pia", "envelopes.add_adjustment"),
        kind="foreign_refund",
        reason="Made in the Dashboard by support",
        provider_object_id=foreign.id,
    )
    adjustment_approve(
        adjustment=adjustment,
        actor=_staff("abe", "reconciliation.approve_adjustment"),
        confirmed_amount_micro=3_000_000,
    )
    envelope = Envelope.objects.get()
    spent = 2_000_000 if duplicate else 0
    assert (envelope.unspent_micro, envelope.total_refunded_micro) == (
        7_000_000 - spent,
        3_000_000 + spent,
    )
    assert reconcile(kind="manual").opened == {}  # recorded: Vouch and the provider agree
    dry = reconcile(kind="manual", dry_run=True)
    assert (dry.opened, dry.corrected) == ({}, 0)  # a live refund: nothing to give back
    return funding, foreign.id


@pytest.mark.parametrize("duplicate", [False, True], ids=["on the funding leg", "on a leg"])
def test_a_recorded_refund_the_provider_shows_failed_is_given_back_wherever_it_was_recorded(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, duplicate: bool
) -> None:
    _, refund_id = recorded_foreign_refund(alice, sdk, duplicate=duplicate)
    stripe_at_sandbox.set_refund_status(refund_id, "failed")
    run = reconcile(kind="manual")
    assert run.corrected == 1
    assert Adjustment.objects.get(provider_object_id=refund_id).released_at is not None
    assert ledger_breaches() == []
    assert open_classes() == []


def test_a_recorded_foreign_refund_the_provider_shows_failed_is_given_back_by_a_run(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    _, refund_id = recorded_foreign_refund(alice, sdk)
    stripe_at_sandbox.set_refund_status(refund_id, "failed")  # no webhook reaches Vouch

    run = reconcile(kind="manual")
    assert run.corrected == 1
    envelope = Envelope.objects.get()
    assert (envelope.unspent_micro, envelope.total_refunded_micro) == (10_000_000, 0)
    assert ledger_breaches() == []
    assert Adjustment.objects.get(provider_object_id=refund_id).released_at is not None
    release = JournalEntry.objects.get(kind="release")
    assert refund_id in release.note
    assert f"reconciliation {run.public_id}" in release.note
    # The charge agrees again (nothing refunded at the provider, nothing here): nothing opened.
    assert open_classes() == []

    again = reconcile(kind="manual")  # released once
    assert (again.corrected, again.opened) == (0, {})
    dry = reconcile(kind="manual", dry_run=True)
    assert (dry.corrected, dry.opened) == (0, {})
    assert JournalEntry.objects.filter(kind="release").count() == 1


def test_a_dry_run_counts_the_release_of_a_recorded_foreign_refund_and_moves_no_money(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    _, refund_id = recorded_foreign_refund(alice, sdk)
    stripe_at_sandbox.set_refund_status(refund_id, "failed")
    dry = reconcile(kind="manual", dry_run=True)
    assert (dry.corrected, dry.opened) == (1, {})  # with it released, its charge would agree
    envelope = Envelope.objects.get()
    assert (envelope.unspent_micro, envelope.total_refunded_micro) == (7_000_000, 3_000_000)
    assert Adjustment.objects.get(provider_object_id=refund_id).released_at is None
    assert not JournalEntry.objects.filter(kind="release").exists()


@pytest.mark.parametrize("field", ["amount", "charge"])
def test_a_recorded_foreign_refund_whose_amount_or_charge_differs_is_refund_mismatch(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, field: str
) -> None:
    funding, refund_id = recorded_foreign_refund(alice, sdk)
    other = FundingLeg.objects.get(
        envelope__public_id=alice.create(10_000_000)["envelope_id"], sequence=1
    )
    changed: dict[str, Any] = {"amount": 500} if field == "amount" else {"charge": other.charge_id}
    stripe_at_sandbox.tamper(refund_id, **changed)

    reconcile(kind="manual")
    mismatch = Discrepancy.objects.get(code="refund_mismatch")
    adjustment = Adjustment.objects.get(provider_object_id=refund_id)
    assert (mismatch.subject_type, mismatch.subject_id) == ("refund", refund_id)
    assert mismatch.differing == [field]
    assert mismatch.vouch_side == {
        "refund": refund_id,
        "charge": funding.charge_id,
        "amount": 300,
        "status": "recorded",
    }
    assert mismatch.provider_side == {
        "refund": refund_id,
        "charge": other.charge_id if field == "charge" else funding.charge_id,
        "amount": 500 if field == "amount" else 300,
        "status": "succeeded",
    }
    assert (mismatch.charge_id, mismatch.envelope_public_id, mismatch.amount_micro) == (
        funding.charge_id,
        funding.envelope.public_id,
        3_000_000,
    )
    assert mismatch.summary == (
        f"Refund {refund_id}, recorded by adjustment {adjustment.public_id}, differs from what "
        f"it recorded in {field}"
    )
    # Escalated on the funding leg whose money the adjustment moved (the refund is not Vouch's).
    assert mismatch.escalation is not None
    assert (mismatch.escalation.subject_type, mismatch.escalation.subject_id) == (
        "funding_leg",
        funding.public_id,
    )


def test_a_recorded_refund_moved_to_another_charge_with_another_amount_is_not_given_back(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    """Both at once: the provider moved the refund to another charge and changed its amount, and
    then failed it: the difference is recorded, and the release service, which gives back only
    the refund recorded on that charge, is not asked for (a dry run counts nothing either)."""
    _, refund_id = recorded_foreign_refund(alice, sdk)
    other = FundingLeg.objects.get(
        envelope__public_id=alice.create(10_000_000)["envelope_id"], sequence=1
    )
    stripe_at_sandbox.tamper(refund_id, charge=other.charge_id, amount=500, status="failed")
    dry = reconcile(kind="manual", dry_run=True)
    assert dry.corrected == 0
    run = reconcile(kind="manual")
    assert run.corrected == 0
    mismatch = Discrepancy.objects.get(code="refund_mismatch")
    assert mismatch.differing == ["charge", "amount"]
    assert mismatch.summary.endswith("differs from what it recorded in charge, amount")
    assert mismatch.vouch_side["status"] == "recorded"
    assert Adjustment.objects.get(provider_object_id=refund_id).released_at is None


def test_a_released_recorded_refund_shows_as_released(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    funding, refund_id = recorded_foreign_refund(alice, sdk)
    stripe_at_sandbox.set_refund_status(refund_id, "failed")
    assert reconcile(kind="manual").corrected == 1
    stripe_at_sandbox.tamper(refund_id, amount=250)
    reconcile(kind="manual")
    mismatch = Discrepancy.objects.get(code="refund_mismatch")
    assert mismatch.vouch_side == {
        "refund": refund_id,
        "charge": funding.charge_id,
        "amount": 300,
        "status": "released",
    }
