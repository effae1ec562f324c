"""Issue 37, item 5 (SPEC §15.4): two refunds made in the Dashboard on one charge are two
`refund_foreign` discrepancies under ONE escalation (one open escalation per funding leg and
class). Approving the adjustment that records one of them resolves its discrepancy, but not the
escalation the other still rests on: the $3.00 the buyer holds stays in the queue until its own
adjustment is approved."""

from __future__ import annotations

import pytest
import stripe

from core.models import AuditEvent
from envelopes.adjustments import adjustment_approve
from envelopes.models import Envelope, FundingLeg
from envelopes.selectors import ledger_breaches
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from reconciliation.services import discrepancy_adjustment_propose
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import person
from verification.models import Escalation, EscalationStatus

pytestmark = pytest.mark.django_db


def _record(discrepancy: Discrepancy, refund_id: str, amount_micro: int) -> None:
    adjustment = discrepancy_adjustment_propose(
        discrepancy=discrepancy,
        actor=person(f"pia{amount_micro}", "envelopes.add_adjustment"),
        kind="foreign_refund",
        reason="Made in the Dashboard by support",
        provider_object_id=refund_id,
    )
    adjustment_approve(
        adjustment=adjustment,
        actor=person(f"abe{amount_micro}", "reconciliation.approve_adjustment"),
        confirmed_amount_micro=amount_micro,
    )


def test_approving_one_of_two_foreign_refunds_keeps_the_shared_escalation_open(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(10_000_000)
    funding = FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)
    two = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 200})
    three = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})

    reconcile(kind="manual")
    found = {d.subject_id: d for d in Discrepancy.objects.filter(code="refund_foreign")}
    assert set(found) == {two.id, three.id}
    escalation = found[two.id].escalation
    assert escalation is not None
    assert found[three.id].escalation_id == escalation.pk  # one escalation, two discrepancies

    _record(found[two.id], two.id, 2_000_000)

    escalation = Escalation.objects.get(pk=escalation.pk)
    assert escalation.status == EscalationStatus.OPEN  # the $3.00 still rests on it
    assert Discrepancy.objects.get(pk=found[two.id].pk).status == "resolved"
    assert Discrepancy.objects.get(pk=found[three.id].pk).is_open  # still in the queue
    assert Envelope.objects.get().unspent_micro == 8_000_000
    kept = AuditEvent.objects.get(action="escalation.kept_open")
    assert (kept.target_type, kept.target_id) == ("escalation", str(escalation.pk))
    assert kept.details["still_resting_on_it"] == [found[three.id].public_id]

    _record(Discrepancy.objects.get(pk=found[three.id].pk), three.id, 3_000_000)

    escalation = Escalation.objects.get(pk=escalation.pk)
    assert (escalation.status, escalation.resolution) == (EscalationStatus.RESOLVED, "adjusted")
    assert Discrepancy.objects.unresolved().count() == 0
    assert Envelope.objects.get().unspent_micro == 5_000_000
    assert ledger_breaches() == []
