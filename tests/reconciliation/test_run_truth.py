"""SPEC §15.3, §15.4: what a run's signed report states is true of the observations that run
stored. Only this run's findings can explain an object in it (a discrepancy left open by an
earlier run explains nothing), and a money discrepancy that clears resolves its escalation,
citing the observation that shows it gone."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from core.models import AuditEvent
from envelopes.models import FundingLeg
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Observation, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation

pytestmark = pytest.mark.django_db


def funded(alice: Api, amount_micro: int = 10_000_000) -> FundingLeg:
    data = alice.create(amount_micro)
    return FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)


def open_classes() -> list[tuple[str, str]]:
    return sorted(Discrepancy.objects.exclude(status="resolved").values_list("code", "subject_id"))


def charge_in(run: Run, charge_id: str) -> dict[str, Any]:
    """The charge as the run's own stored pages (or reads) show it."""
    for observation in Observation.objects.filter(run=run, kind__in=("charges", "charge")):
        answer = observation.answer()
        listed = observation.listed() if observation.kind == "charges" else [answer]
        for charge in listed:
            if charge.get("id") == charge_id:
                return dict(charge)
    raise AssertionError(f"run {run.public_id} stored no observation of {charge_id}")


def test_an_earlier_runs_open_refund_discrepancy_does_not_hide_a_charge_that_disagrees(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    first = reconcile(kind="manual")
    # The foreign refund explains the charge's 300 cents refunded: one discrepancy, on the refund.
    assert open_classes() == [("refund_foreign", foreign.id)]
    assert first.opened == {"refund_foreign": 1}

    # The provider now shows that refund failed, but its charge still counts 300 cents refunded
    # (tamper: no other object touched). Vouch's legs hold nothing on it: the charge disagrees.
    stripe_at_sandbox.tamper(foreign.id, status="failed")
    second = reconcile(kind="manual")

    shown = charge_in(second, funding.charge_id)
    assert shown["amount_refunded"] == 300  # what this run stored disagrees with the ledger (0)
    # The refund discrepancy cleared (the refund gave nothing back); the charge's own check is not
    # hidden by it: the report does not state agreement on that charge.
    assert open_classes() == [("charge_refunded_mismatch", funding.public_id)]
    assert second.cleared == {"refund_foreign": 1}
    assert second.opened == {"charge_refunded_mismatch": 1}
    subjects = [d["subject"] for d in second.report["open_discrepancies"]]
    assert subjects == [f"funding_leg:{funding.public_id}"]


def test_a_money_discrepancy_that_clears_resolves_its_escalation_citing_the_observation(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.escalation is not None
    assert discrepancy.escalation.status == "open"

    # The Dashboard refund failed: the buyer got nothing back, Vouch counted nothing.
    stripe_at_sandbox.set_refund_status(foreign.id, "failed")
    clearing = reconcile(kind="manual")
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
    cited = discrepancy.cleared_by
    assert cited is not None
    assert cited.run == clearing
    assert foreign.id in str(cited.answer())

    escalation = Escalation.objects.get(pk=discrepancy.escalation.pk)
    assert escalation.status == "resolved"
    assert escalation.resolution == "cleared"
    assert escalation.resolved_at is not None
    assert escalation.resolved_by is None  # no person: the run saw it gone
    assert cited.sha256 in escalation.resolution_note
    assert discrepancy.public_id in escalation.resolution_note
    event = AuditEvent.objects.get(action="escalation.clear")
    assert event.target_id == str(escalation.pk)
    assert event.details["observation"] == cited.pk
    assert event.details["sha256"] == cited.sha256
    assert event.details["run"] == clearing.public_id


def test_an_evidence_discrepancy_that_clears_has_no_escalation_to_resolve(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount=999)
    reconcile(kind="manual")
    stripe_at_sandbox.tamper(funding.charge_id, amount=1_000)
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get()
    assert (discrepancy.resolution, discrepancy.escalation) == ("cleared", None)
    assert not Escalation.objects.exists()
