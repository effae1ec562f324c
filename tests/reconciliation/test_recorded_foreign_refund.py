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
from envelopes.models import Adjustment, Envelope, FundingLeg, JournalEntry
from envelopes.selectors import ledger_breaches
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from reconciliation.services import discrepancy_adjustment_propose
from stripe_sandbox.client import SandboxControl
from tests.envelopes.conftest import Api

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


def recorded_foreign_refund(alice: Api, sdk: stripe.StripeClient) -> tuple[FundingLeg, str]:
    """A $10.00 envelope whose charge got a $3.00 Dashboard refund, found by a run and recorded
    by an adjustment one person proposed and another approved."""
    data = alice.create(10_000_000)
    funding = FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get(code="refund_foreign")
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
    assert (envelope.unspent_micro, envelope.total_refunded_micro) == (7_000_000, 3_000_000)
    assert reconcile(kind="manual").opened == {}  # recorded: Vouch and the provider agree
    return funding, foreign.id


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
    assert (mismatch.subject_type, mismatch.subject_id) == ("refund", refund_id)
    assert mismatch.differing == [field]
    assert mismatch.vouch_side["charge"] == funding.charge_id
    assert mismatch.vouch_side["amount"] == 300
    assert mismatch.provider_side[field] == (500 if field == "amount" else other.charge_id)
    assert mismatch.escalation is not None
    assert mismatch.escalation.subject_id == funding.public_id
