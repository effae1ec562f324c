"""Links and formats on the reconciliation side of the admin (issue 27, item 4): an escalation's
page links its subject, its discrepancy, its envelope and every id in its reason; a discrepancy
shows money as dollars, the provider's raw cents labelled as cents; the approval form takes
dollars, as its label says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from envelopes import services
from envelopes.models import (
    Adjustment,
    Envelope,
    FundingLeg,
    RefundLeg,
    RefundOperation,
)
from reconciliation.admin import ApproveForm
from reconciliation.models import Discrepancy
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.reconciliation import a_run
from tests.reconciliation.test_admin_discrepancy import (
    VIEW,
    a_page,
    as_,
    messages_of,
    page_of,
    record,
    side_rows,
    staff,
)
from verification.models import Escalation

pytestmark = pytest.mark.django_db

CHARGE = "ch_3FmtCharge1"


def href(url: str) -> str:
    return f'href="{url}"'


def a_refund_leg() -> RefundLeg:
    """An envelope's refund leg, as rows: enough for pages to link to (no money moves here)."""
    buyer = User.objects.create_user("bea", "bea@example.com", "pw-bea-123")
    envelope = Envelope.objects.create(owner=buyer)
    funding = FundingLeg.objects.create(
        envelope=envelope,
        kind="initial",
        sequence=1,
        amount_micro=5_000_000,
        status="succeeded",
        payment_method="pm_card_visa",
        idempotency_key=f"fund:{envelope.public_id}",
        charge_id=CHARGE,
    )
    operation = RefundOperation.objects.create(
        envelope=envelope, requested_micro=2_000_000, remainder_micro=0, created_by=buyer
    )
    return RefundLeg.objects.create(
        operation=operation,
        funding_leg=funding,
        sequence=1,
        amount_micro=2_000_000,
        idempotency_key=f"refund:{operation.public_id}:1",
        reserved_at=timezone.now(),
    )


def test_an_escalation_page_links_its_subject_discrepancy_envelope_and_the_ids_in_its_reason() -> (
    None
):
    leg = a_refund_leg()
    envelope = leg.operation.envelope
    run = a_run()
    discrepancy = record(
        run,
        code="refund_missing",
        subject_type="refund_leg",
        subject_id=leg.public_id,
        summary=f"Refund leg {leg.public_id} of envelope {envelope.public_id} (charge {CHARGE}) "
        "is not at the provider.",
        charge_id=CHARGE,
        envelope_public_id=envelope.public_id,
        amount_micro=2_000_000,
    )
    escalation = Escalation.objects.get(pk=discrepancy.escalation_id)
    assert run.public_id in escalation.reason  # the reason names the run, the leg, the charge

    viewer = as_(staff("vic", ("verification", "view_escalation"), VIEW))
    html = viewer.get(
        reverse("admin:verification_escalation_change", args=[escalation.pk])
    ).content.decode()

    leg_page = reverse("admin:envelopes_refundoperation_change", args=[leg.operation_id])
    envelope_page = reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    # The subject (a refund leg: on its refund operation's page, at its row).
    assert href(f"{leg_page}#leg-{leg.public_id}") in html
    # Its discrepancy and its envelope, as rows of their own.
    assert href(page_of(discrepancy)) in html
    assert href(envelope_page) in html
    # Every id in the reason: the reconciliation run, the leg, the envelope, the charge.
    reason = html[html.index('id="escalation-reason"') :]
    assert href(reverse("admin:reconciliation_run_change", args=[run.pk])) in reason
    assert href(f"{leg_page}#leg-{leg.public_id}") in reason
    assert href(envelope_page) in reason
    assert f"https://dashboard.stripe.com/test/payments/{CHARGE}" in reason


def test_an_id_of_nothing_stays_text_not_a_dead_link() -> None:
    discrepancy = record(
        a_run(),
        code="refund_missing",
        subject_type="refund_leg",
        subject_id="rfl_gone000000000000000000",
        summary="Refund leg rfl_gone000000000000000000 is not at the provider.",
    )
    viewer = as_(staff("vic", ("verification", "view_escalation"), VIEW))
    html = viewer.get(
        reverse("admin:verification_escalation_change", args=[discrepancy.escalation_id])
    ).content.decode()
    assert "rfl_gone000000000000000000" in html
    assert "#leg-rfl_gone" not in html
    assert href(page_of(discrepancy)) in html  # what exists still links


def test_a_discrepancy_shows_dollars_and_the_providers_cents_labelled_as_cents() -> None:
    run = a_run()
    shown = a_page(run, {"object": "list", "data": [{"id": "re_1", "amount": 100}]})
    discrepancy = record(
        run,
        code="refund_mismatch",
        subject_type="refund_leg",
        subject_id="rfl_cents",
        vouch_side={"amount": 2000, "currency": "usd", "charge": CHARGE},
        provider_side={"amount": 100, "currency": "usd"},
        differing=["amount"],
        charge_id=CHARGE,
        amount_micro=20_000_000,
        observation=shown,
    )
    html = as_(staff("vic", VIEW)).get(page_of(discrepancy)).content.decode()

    rows = side_rows(html)
    field, vouch, provider = rows["amount"][1]
    assert field.startswith("amount")
    assert "$20.00" in vouch
    assert "2,000 cents" in vouch
    assert "$1.00" in provider
    assert "100 cents" in provider
    assert provider != "100"  # never a bare number beside micro-dollars
    # The discrepancy's own amount: dollars, the micro-dollars one hover away.
    assert 'title="20,000,000 micro-dollars">$20.00<' in html
    assert "20000000" not in html
    assert rows["currency"][1][1:] == ["usd", "usd"]  # not an amount: as it is


def test_the_approval_form_reads_dollars() -> None:
    for typed, micro in (
        ("1.00", 1_000_000),
        ("$1.00", 1_000_000),
        ("1", 1_000_000),
        ("$1250.50", 1_250_500_000),
        ("1,50", 1_500_000),  # a decimal comma (issue 41)
        ("0.005433", 5_433),
    ):
        form = ApproveForm({"confirmed_amount": typed})
        assert form.is_valid(), (typed, form.errors)
        assert form.cleaned_data["confirmed_amount"] == micro, typed
    for typed in ("two", "", "$1,250.50", "1e6", "0.0000001", "1.2.3", "-1.00"):
        assert not ApproveForm({"confirmed_amount": typed}).is_valid(), typed
    label = str(ApproveForm().fields["confirmed_amount"].label)
    assert "dollars" in label
    assert "micro" not in label


def test_the_adjustment_page_takes_the_amount_in_dollars_as_it_says(
    alice: Api, sandbox: SandboxControl
) -> None:
    proposer = staff(
        "pia",
        ("envelopes", "add_adjustment"),
        ("verification", "view_escalation"),
        ("reconciliation", "view_adjustment"),
    )
    approver = staff(
        "aron", ("reconciliation", "approve_adjustment"), ("reconciliation", "view_adjustment")
    )
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.stranded_resume(older_than_s=60)
        escalation = Escalation.objects.get()
        propose = (
            reverse("admin:reconciliation_adjustment_propose") + f"?escalation={escalation.pk}"
        )
        as_(proposer).post(propose, {"kind": "leg_release", "reason": "No refund at Stripe."})
        adjustment = Adjustment.objects.get()
        page = as_(approver).get(
            reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])
        )
        html = page.content.decode()
        assert "Amount you confirm (dollars)" in html
        assert 'title="2,000,000 micro-dollars">$2.00<' in html
        decide = reverse("admin:reconciliation_adjustment_decide", args=[adjustment.pk])

        # Micro-dollars typed into the dollars field are two million dollars: refused, and said.
        wrong: Any = as_(approver).post(
            decide, {"approve": "1", "confirmed_amount": "2000000"}, follow=True
        )
        assert any("adjustment_amount_mismatch" in m for m in messages_of(wrong))
        assert Envelope.objects.get().reserved_micro == 2_000_000

        right = as_(approver).post(
            decide, {"approve": "1", "confirmed_amount": "$2.00"}, follow=True
        )
        assert any("approved and written" in m for m in messages_of(right)), messages_of(right)
    envelope = Envelope.objects.get()
    assert (envelope.reserved_micro, envelope.unspent_micro) == (0, 5_000_000)
    assert not Discrepancy.objects.exists()


def test_a_runs_and_an_observations_pages_link_the_subjects_they_list() -> None:
    leg = a_refund_leg()
    run = a_run()
    shown = a_page(run, {"object": "list", "data": [{"id": "re_3Abc", "amount": 100}]})
    record(
        run,
        code="refund_mismatch",
        subject_type="refund_leg",
        subject_id=leg.public_id,
        summary=f"Refund leg {leg.public_id} differs from re_3Abc.",
        observation=shown,
    )
    leg_page = reverse("admin:envelopes_refundoperation_change", args=[leg.operation_id])
    client = as_(
        staff("rob", ("reconciliation", "view_run"), ("reconciliation", "view_observation"))
    )

    run_html = client.get(reverse("admin:reconciliation_run_change", args=[run.pk])).content
    seen_html = client.get(reverse("admin:reconciliation_observation_change", args=[shown.pk]))

    assert href(f"{leg_page}#leg-{leg.public_id}") in run_html.decode()
    assert "https://dashboard.stripe.com/test/refunds/re_3Abc" in run_html.decode()
    assert href(f"{leg_page}#leg-{leg.public_id}") in seen_html.content.decode()
