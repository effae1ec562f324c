"""Every discrepancy class of SPEC §15.2, made on purpose: each test makes exactly that drift (at
the provider through the sandbox's control or Stripe's API, or in Vouch's rows where the drift can
only start on our side), and one run opens exactly one discrepancy of that class and nothing
else. Then, where it can be repaired, repairing it and running again clears it, citing the
observation that shows it gone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.db.models import F
from django.utils import timezone

from disputes.models import FilingStatus, Packet
from envelopes.models import Envelope, FundingLeg, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Observation, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.disputes import World, contest_ready
from verification.models import Escalation, VerificationRun

pytestmark = pytest.mark.django_db


def run() -> Run:
    return reconcile(kind="manual")


def open_classes() -> list[tuple[str, str]]:
    return sorted(Discrepancy.objects.exclude(status="resolved").values_list("code", "subject_id"))


def funded(alice: Api, amount_micro: int = 10_000_000) -> tuple[dict[str, Any], FundingLeg]:
    data = alice.create(amount_micro)
    return data, FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)


def refunded(alice: Api, envelope_id: str, amount_micro: int) -> RefundLeg:
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": amount_micro}
    )
    assert response.status_code in (200, 202), response.content
    return RefundLeg.objects.order_by("-id").first()  # type: ignore[return-value]


def test_a_clean_ledger_opens_nothing_and_counts_what_it_compared(alice: Api) -> None:
    data, _funding = funded(alice)
    refunded(alice, data["envelope_id"], 2_000_000)
    result = run()
    assert open_classes() == []
    assert result.compared == {"refund": 1, "charge": 1}
    assert result.status == "completed"
    assert result.pages >= 3  # one page of refunds, charges, disputes each
    assert result.provider_calls == result.pages  # nothing read alone: the listing showed all
    assert Observation.objects.filter(run=result, kind="refunds").count() == 1


def test_charge_missing(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    _, funding = funded(alice)
    stripe_at_sandbox.forget(funding.charge_id)
    run()
    assert open_classes() == [("charge_missing", funding.public_id)]
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.severity == "money"
    assert discrepancy.observation is not None
    assert discrepancy.observation.answer()["error"] == "resource_missing"


def test_charge_mismatch_and_it_clears_when_repaired(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    _, funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount=999)
    run()
    assert open_classes() == [("charge_mismatch", funding.public_id)]
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.differing == ["amount"]
    assert (discrepancy.vouch_side["amount"], discrepancy.provider_side["amount"]) == (1000, 999)

    run()  # seen again: nothing new
    discrepancy.refresh_from_db()
    assert (discrepancy.seen_count, Discrepancy.objects.count()) == (2, 1)

    stripe_at_sandbox.tamper(funding.charge_id, amount=1000)
    third = run()
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
    assert discrepancy.cleared_by is not None
    assert discrepancy.cleared_by.run == third
    assert funding.charge_id in str(discrepancy.cleared_by.answer())
    assert third.cleared == {"charge_mismatch": 1}


def test_charge_refunded_mismatch(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    data, funding = funded(alice)
    refunded(alice, data["envelope_id"], 2_000_000)
    stripe_at_sandbox.tamper(funding.charge_id, amount_refunded=500)
    run()
    assert open_classes() == [("charge_refunded_mismatch", funding.public_id)]
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.amount_micro == 3_000_000  # 500 cents at the provider, 200 here
    sides = (discrepancy.vouch_side, discrepancy.provider_side)
    assert [side["amount_refunded"] for side in sides] == [200, 500]
    assert Escalation.objects.filter(verdict_class="charge_refunded_mismatch").count() == 1


def test_refund_missing(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    data, _ = funded(alice)
    leg = refunded(alice, data["envelope_id"], 2_000_000)
    stripe_at_sandbox.forget(leg.provider_refund_id)
    run()
    assert open_classes() == [("refund_missing", leg.public_id)]


def test_refund_mismatch(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    data, _ = funded(alice)
    leg = refunded(alice, data["envelope_id"], 2_000_000)
    stripe_at_sandbox.tamper(leg.provider_refund_id, metadata={"vouch_leg": "rfl_someone_else"})
    run()
    assert open_classes() == [("refund_mismatch", leg.public_id)]
    assert Discrepancy.objects.get().differing == ["vouch_leg"]


def test_refund_status_drift(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    data, _ = funded(alice)
    leg = refunded(alice, data["envelope_id"], 2_000_000)
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed")
    first = run()  # the one automatic correction: the failed refund's leg is released
    assert first.corrected == 1
    assert open_classes() == []
    leg.refresh_from_db()
    assert leg.released
    stripe_at_sandbox.tamper(leg.provider_refund_id, status="succeeded")
    run()
    assert open_classes() == [("refund_status_drift", leg.public_id)]


def test_refund_foreign(alice: Api, sdk: stripe.StripeClient) -> None:
    _, funding = funded(alice)
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    run()
    assert open_classes() == [("refund_foreign", foreign.id)]
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.amount_micro == 3_000_000
    assert discrepancy.escalation is not None
    assert (discrepancy.escalation.subject_type, discrepancy.escalation.subject_id) == (
        "funding_leg",
        funding.public_id,
    )


def test_refund_duplicate(alice: Api, sdk: stripe.StripeClient) -> None:
    data, funding = funded(alice)
    leg = refunded(alice, data["envelope_id"], 2_000_000)
    sdk.v1.refunds.create(
        params={
            "charge": funding.charge_id,
            "amount": 200,
            "metadata": {"vouch_leg": leg.public_id},
        }
    )
    run()
    assert open_classes() == [("refund_duplicate", leg.public_id)]


def test_dispute_unrecorded(alice: Api, stripe_at_sandbox: SandboxControl, settings: Any) -> None:
    settings.RECONCILIATION_GRACE_S = 0  # its webhook is not on its way: there is none
    _, funding = funded(alice)
    opened = stripe_at_sandbox.open_dispute(funding.charge_id)
    run()
    assert open_classes() == [("dispute_unrecorded", opened["id"])]


def test_a_dispute_inside_the_grace_period_is_expected(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    _, funding = funded(alice)
    stripe_at_sandbox.open_dispute(funding.charge_id)
    result = run()
    assert open_classes() == []
    assert result.expected == 1


def test_dispute_status_drift(world: World, stripe_at_sandbox: SandboxControl) -> None:
    world.fund()
    dispute = world.dispute()
    assert run().opened == {}
    stripe_at_sandbox.tamper(dispute.provider_dispute_id, status="under_review")
    run()
    assert open_classes() == [("dispute_status_drift", dispute.provider_dispute_id)]


def test_filing_unconfirmed(world: World, ops: Any) -> None:
    packet = contest_ready(world, ops)
    Packet.objects.filter(pk=packet.pk).update(filing_status=FilingStatus.FILED)
    run()
    assert open_classes() == [("filing_unconfirmed", packet.dispute.provider_dispute_id)]


def test_leg_stuck(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    data, _ = funded(alice)
    stripe_at_sandbox.add_fault("/v1/refunds", "timeout", method="POST", times=10)
    response = alice.post(
        f"/api/v1/escrow/envelopes/{data['envelope_id']}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code in (200, 202), response.content
    leg = RefundLeg.objects.get()
    assert leg.outcome in (LegOutcome.UNKNOWN, LegOutcome.RESERVED)
    assert run().opened == {}  # inside the stuck period it is in flight
    RefundLeg.objects.filter(pk=leg.pk).update(reserved_at=timezone.now() - timedelta(hours=2))
    run()
    assert open_classes() == [("leg_stuck", leg.public_id)]
    assert Discrepancy.objects.get().severity == "hygiene"


def test_funding_stuck(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    data, _funding = funded(alice)
    stripe_at_sandbox.add_fault("/v1/payment_intents", "timeout", method="POST", times=10)
    response = alice.post(
        f"/api/v1/escrow/envelopes/{data['envelope_id']}/top-ups",
        {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    )
    assert response.status_code >= 202, response.content
    pending = FundingLeg.objects.get(status="pending")
    assert run().opened == {}  # inside the stuck period it is in flight
    FundingLeg.objects.filter(pk=pending.pk).update(created_at=timezone.now() - timedelta(hours=2))
    run()
    assert open_classes() == [("funding_stuck", pending.public_id)]


def test_run_overdue(alice: Api) -> None:
    funded(alice)
    VerificationRun.objects.update(deadline_at=timezone.now() - timedelta(minutes=1))
    vrun = VerificationRun.objects.get()
    run()
    assert open_classes() == [("run_overdue", vrun.public_id)]


def test_ledger_breach(alice: Api) -> None:
    data, _ = funded(alice)
    Envelope.objects.update(
        unspent_micro=F("unspent_micro") - 10_000, reserved_micro=F("reserved_micro") + 10_000
    )
    assert ledger_breaches()
    run()
    assert open_classes() == [("ledger_breach", data["envelope_id"])]


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


@pytest.mark.parametrize("drift", ["foreign", "duplicate"])
def test_an_approved_adjustment_resolves_the_refund_and_the_next_run_agrees(
    alice: Api, sdk: stripe.StripeClient, drift: str
) -> None:
    from envelopes.adjustments import adjustment_approve
    from reconciliation.services import discrepancy_adjustment_propose

    data, funding = funded(alice)
    leg = refunded(alice, data["envelope_id"], 2_000_000)
    metadata = {"vouch_leg": leg.public_id} if drift == "duplicate" else {}
    extra = sdk.v1.refunds.create(
        params={"charge": funding.charge_id, "amount": 300, "metadata": metadata}
    )
    run()
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.code == f"refund_{drift}"
    proposer = _staff("pia", "envelopes.add_adjustment")
    approver = _staff("abe", "reconciliation.approve_adjustment")
    adjustment = discrepancy_adjustment_propose(
        discrepancy=discrepancy,
        actor=proposer,
        kind="foreign_refund",
        reason="Made in the Dashboard by support",
        provider_object_id=extra.id,
    )
    assert adjustment.amount_micro == 3_000_000
    adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=3_000_000)
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "adjusted")
    envelope = Envelope.objects.get()
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (5_000_000, 5_000_000)
    assert ledger_breaches() == []
    assert run().opened == {}
    assert open_classes() == []
