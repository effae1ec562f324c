"""Issue 37's mutation bullet for the shared escalation (envelopes/adjustments/deciding.py,
`_escalation_answered`; verification/services/escalations.py, `escalation_held_by`): the approval
that leaves an escalation open names, in the audit trail, who approved which adjustment and what
still rests on the escalation; the last approval resolves it as `adjusted`, saying which
adjustment, by whom proposed and why."""

from __future__ import annotations

import pytest
import stripe

from core.models import AuditEvent
from envelopes.adjustments import adjustment_approve
from envelopes.models import Adjustment, FundingLeg
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from reconciliation.services import discrepancies_resting_on, discrepancy_adjustment_propose
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import person
from verification.models import Escalation, EscalationStatus
from verification.services import escalation_held_by, escalation_holder_register

pytestmark = pytest.mark.django_db


def _record(discrepancy: Discrepancy, refund_id: str, amount_micro: int) -> Adjustment:
    adjustment = discrepancy_adjustment_propose(
        discrepancy=discrepancy,
        actor=person(f"pia{amount_micro}", "envelopes.add_adjustment"),
        kind="foreign_refund",
        reason="Made in the Dashboard by support",
        provider_object_id=refund_id,
    )
    return adjustment_approve(
        adjustment=adjustment,
        actor=person(f"abe{amount_micro}", "reconciliation.approve_adjustment"),
        confirmed_amount_micro=amount_micro,
    )


def test_what_still_rests_on_a_shared_escalation_is_named_and_the_last_approval_resolves_it(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(10_000_000)
    funding = FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)
    two = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 200})
    three = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    reconcile(kind="manual")
    found = {d.subject_id: d for d in Discrepancy.objects.filter(code="refund_foreign")}
    escalation = found[two.id].escalation
    assert escalation is not None
    assert sorted(escalation_held_by(escalation)) == sorted(
        [found[two.id].public_id, found[three.id].public_id]
    )
    # Registered again (an app's ready() run twice): still asked once.
    escalation_holder_register(discrepancies_resting_on)
    assert len(escalation_held_by(escalation)) == 2

    first = _record(found[two.id], two.id, 2_000_000)

    kept = AuditEvent.objects.get(action="escalation.kept_open")
    assert kept.actor == first.decided_by
    assert kept.details == {
        "adjustment": first.public_id,
        "still_resting_on_it": [found[three.id].public_id],
    }
    assert escalation_held_by(Escalation.objects.get(pk=escalation.pk)) == [
        found[three.id].public_id
    ]

    last = _record(Discrepancy.objects.get(pk=found[three.id].pk), three.id, 3_000_000)

    escalation = Escalation.objects.get(pk=escalation.pk)
    assert (escalation.status, escalation.resolution) == (EscalationStatus.RESOLVED, "adjusted")
    assert escalation_held_by(escalation) == []
    assert AuditEvent.objects.filter(action="escalation.kept_open").count() == 1
    assert last.public_id in escalation.resolution_note
