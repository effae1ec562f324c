"""Reconciliation compares the money each dispute moved at Stripe with the ledger (SPEC §18,
issue 37): a chargeback whose `funds_withdrawn` event never reached Vouch (the webhook lost, the
catch-up not run) leaves the charge's money unspent in the ledger while Stripe has withdrawn it —
`dispute_funds_mismatch`, money severity, escalated, with both sides shown. The remedy named in
docs/reconciliation.md (`manage.py dispute_funds_follow`) brings the ledger to Stripe's word, and
the next run clears it. Inside the grace period the withdrawal is in flight, not a discrepancy.

Before issue 37 the class did not exist: the run found nothing for the chargeback and the
envelope kept $30 unspent that Stripe had withdrawn."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from envelopes.models import Envelope
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs
from verification.models import Escalation

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000
CLASS = "dispute_funds_mismatch"


def test_a_chargeback_the_ledger_never_heard_of_is_a_money_discrepancy_until_followed(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    data = alice.create(30 * DOLLAR)
    settle_runs()
    opened = stripe_at_sandbox.open_dispute(data["funding_legs"][0]["charge"], reason="fraudulent")
    # No event processed: as if the webhook was lost and the catch-up has not run yet.

    within_grace = reconcile(kind="manual")
    assert not Discrepancy.objects.filter(code=CLASS).exists()
    assert within_grace.expected >= 1

    settings.RECONCILIATION_GRACE_S = 0
    reconcile(kind="manual")
    found = Discrepancy.objects.get(code=CLASS, subject_id=opened["id"])
    assert found.status == "open"
    assert found.severity == "money"
    assert (found.provider_side["withdrawn"], found.vouch_side["withdrawn"]) == (3000, 0)
    assert found.differing == ["withdrawn"]
    assert Escalation.objects.filter(subject_id=opened["id"], money=True).exists()
    assert Envelope.objects.get(public_id=data["envelope_id"]).unspent_micro == 30 * DOLLAR

    call_command("dispute_funds_follow", opened["id"])
    envelope = Envelope.objects.get(public_id=data["envelope_id"])
    assert (envelope.unspent_micro, envelope.held_micro) == (0, 30 * DOLLAR)

    reconcile(kind="manual")
    found.refresh_from_db()
    assert (found.status, found.resolution) == ("resolved", "cleared")
