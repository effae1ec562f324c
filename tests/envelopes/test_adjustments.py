"""A refund leg the provider never made (issue 10, item 5; SPEC §3, §15.4): past its key's life the
lookup finds nothing and opens ONE escalation with its notification; the money stays reserved
until a person proposes an adjustment — release it, or accept the leg naming the provider refund —
and a second person with `reconciliation.approve_adjustment` approves it, confirming the amount.
The one adjustment service writes the `adjust` journal entry under the envelope lock. Money
escalations from verdicts (UNVERIFIABLE, wrong amount, duplicate) resolve the same way; note-only
resolution stays for escalations about no money."""

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
import stripe
import time_machine
from django.core import mail
from django.core.management import call_command
from django.utils import timezone

from accounts.models import User
from core.exceptions import PermissionDenied
from core.models import AuditEvent
from envelopes import services
from envelopes.adjustments import adjustment_approve, adjustment_propose, adjustment_reject
from envelopes.exceptions import (
    AdjustmentAmountMismatch,
    AdjustmentNotApplicable,
    AdjustmentProviderMismatch,
    AdjustmentSelfApproval,
)
from envelopes.models import (
    Adjustment,
    AdjustmentStatus,
    Envelope,
    FundingLeg,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import LATER, later, person
from tests.helpers import settle_runs
from verification.models import Escalation, EscalationStatus, VerificationRun
from verification.services import (
    EscalationNeedsAdjustment,
    escalation_resolve,
    provider_event_process,
    provider_event_store,
    run_attempt,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def proposer(db: None) -> User:
    return person("pia", "envelopes.add_adjustment", "verification.resolve_escalation")


@pytest.fixture
def approver(db: None) -> User:
    return person(
        "aron",
        "reconciliation.approve_adjustment",
        "envelopes.add_adjustment",
        "verification.resolve_escalation",
    )


def _stuck_leg(alice: Api, sandbox: SandboxControl) -> tuple[str, RefundLeg]:
    """A $2 refund whose every attempt failed before the provider applied anything."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    assert sandbox.state()["counts"]["refunds"] == 0
    return envelope_id, RefundLeg.objects.get()


def _escalate(capture: Any) -> Escalation:
    for _ in range(3):  # three ticks of the job, a day later
        with capture(execute=True):
            services.stranded_resume(older_than_s=60)
    return Escalation.objects.get()


def test_a_leg_the_provider_never_made_opens_one_escalation(
    alice: Api,
    sandbox: SandboxControl,
    proposer: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    envelope_id, leg = _stuck_leg(alice, sandbox)
    with later():
        escalation = _escalate(django_capture_on_commit_callbacks)
    assert (escalation.subject_type, escalation.subject_id) == ("refund_leg", leg.public_id)
    assert escalation.money is True
    assert escalation.status == EscalationStatus.OPEN
    assert escalation.notifications.count() == 1
    assert len(mail.outbox) == 1
    assert leg.public_id in mail.outbox[0].body
    assert AuditEvent.objects.filter(action="escalation.open").count() == 1  # not one per tick
    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.UNKNOWN  # never assumed either way
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.reserved_micro, envelope.unspent_micro) == (2_000_000, 3_000_000)
    assert sandbox.state()["counts"]["refunds"] == 0
    assert ledger_breaches() == []


def test_a_release_proposed_by_one_and_approved_by_another_gives_the_money_back(
    alice: Api,
    sandbox: SandboxControl,
    proposer: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    envelope_id, leg = _stuck_leg(alice, sandbox)
    with later():
        _release_under_four_eyes(
            envelope_id, leg, proposer, approver, django_capture_on_commit_callbacks
        )
    shown = alice.get(f"/api/v1/escrow/refunds/{leg.operation.public_id}").json()["data"]
    assert (shown["status"], shown["verification_status"]) == ("failed", "not_applicable")
    assert shown["legs"][0]["outcome"] == "void"
    assert shown["failed_micro"] == 2_000_000
    with later():
        services.stranded_resume(older_than_s=60)  # the job leaves a void leg alone
    assert sandbox.state()["counts"]["refunds"] == 0
    actions = list(AuditEvent.objects.values_list("action", flat=True))
    assert "adjustment.propose" in actions
    assert "adjustment.approve" in actions


def _release_under_four_eyes(
    envelope_id: str, leg: RefundLeg, proposer: User, approver: User, capture: Any
) -> None:
    escalation = _escalate(capture)
    with pytest.raises(EscalationNeedsAdjustment):  # a note cannot resolve money
        escalation_resolve(escalation=escalation, actor=approver, note="looked, fine")
    adjustment = adjustment_propose(
        actor=proposer,
        kind="leg_release",
        reason="Dashboard: no refund on the charge.",
        escalation=escalation,
    )
    assert (adjustment.status, adjustment.amount_micro) == (AdjustmentStatus.PROPOSED, 2_000_000)
    assert Envelope.objects.get(public_id=envelope_id).reserved_micro == 2_000_000  # nothing yet
    with pytest.raises(AdjustmentSelfApproval):
        adjustment_approve(adjustment=adjustment, actor=proposer, confirmed_amount_micro=2_000_000)
    with pytest.raises(PermissionDenied):  # no reconciliation.approve_adjustment
        adjustment_approve(
            adjustment=adjustment,
            actor=person("nina", "envelopes.add_adjustment"),
            confirmed_amount_micro=2_000_000,
        )
    with pytest.raises(AdjustmentAmountMismatch):
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=200)
    applied = adjustment_approve(
        adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
    )
    assert applied.status == AdjustmentStatus.APPLIED
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.reserved_micro, envelope.unspent_micro) == (0, 5_000_000)
    leg.refresh_from_db()
    assert (leg.outcome, leg.released) == (LegOutcome.VOID, True)
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.adjustment_id, entry.reserved_delta, entry.unspent_delta) == (
        applied.pk,
        -2_000_000,
        2_000_000,
    )
    assert FundingLeg.objects.get().reserved_micro == 0
    escalation.refresh_from_db()
    assert (escalation.status, escalation.resolution, escalation.resolved_by) == (
        EscalationStatus.RESOLVED,
        "adjusted",
        approver,
    )
    assert ledger_breaches() == []
    call_command("check_ledger", stdout=StringIO())  # exits 0
    with pytest.raises(AdjustmentNotApplicable):  # approving twice, or a second correction
        adjustment_propose(actor=proposer, kind="leg_release", reason="again", refund_leg=leg)


def test_accepting_a_leg_names_the_refund_the_provider_holds(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Someone refunded by hand in the Dashboard (no Vouch metadata): the lookup cannot find it,
    a person can — and the correction is checked against the provider."""
    envelope_id, leg = _stuck_leg(alice, sandbox)
    by_hand = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 200})
    other = alice.create(3_000_000)["funding_legs"][0]["charge"]
    elsewhere = sdk.v1.refunds.create(params={"charge": other, "amount": 200})
    with time_machine.travel(timezone.now() + LATER, tick=True):
        escalation = _escalate(django_capture_on_commit_callbacks)
        with pytest.raises(AdjustmentProviderMismatch):  # a refund on another charge
            adjustment_propose(
                actor=proposer,
                kind="leg_accept",
                reason="x",
                escalation=escalation,
                provider_object_id=elsewhere.id,
            )
        with pytest.raises(AdjustmentProviderMismatch):  # no such refund
            adjustment_propose(
                actor=proposer,
                kind="leg_accept",
                reason="x",
                escalation=escalation,
                provider_object_id="re_nope",
            )
        adjustment = adjustment_propose(
            actor=proposer,
            kind="leg_accept",
            reason="Refunded by hand in the Dashboard.",
            escalation=escalation,
            provider_object_id=by_hand.id,
        )
        assert adjustment.provider_object["id"] == by_hand.id
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000)
    leg.refresh_from_db()
    assert (leg.outcome, leg.provider_refund_id) == (LegOutcome.ACCEPTED, by_hand.id)
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.reserved_micro, envelope.total_refunded_micro) == (0, 2_000_000)
    assert leg.verification_run is not None  # proven by a readback, like any accepted leg
    assert settle_runs()[leg.verification_run.pk] == "VERIFIED"
    assert ledger_breaches() == []


def test_a_refund_that_failed_since_the_proposal_is_no_reason_to_approve(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    _, leg = _stuck_leg(alice, sandbox)
    by_hand = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 200})
    with time_machine.travel(timezone.now() + LATER, tick=True):
        escalation = _escalate(django_capture_on_commit_callbacks)
        adjustment = adjustment_propose(
            actor=proposer,
            kind="leg_accept",
            reason="by hand",
            escalation=escalation,
            provider_object_id=by_hand.id,
        )
        sandbox.set_refund_status(by_hand.id, "failed", "lost_or_stolen_card")
        with pytest.raises(AdjustmentProviderMismatch):
            adjustment_approve(
                adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
            )
        adjustment_reject(adjustment=adjustment, actor=approver, note="the refund failed")
        release = adjustment_propose(
            actor=proposer, kind="leg_release", reason="nothing went back", escalation=escalation
        )
        adjustment_approve(adjustment=release, actor=approver, confirmed_amount_micro=2_000_000)
    assert list(Adjustment.objects.values_list("status", flat=True).order_by("id")) == [
        "rejected",
        "applied",
    ]
    assert ledger_breaches() == []


def test_no_correction_by_hand_while_vouch_may_still_send_the_leg(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    _, leg = _stuck_leg(alice, sandbox)
    with pytest.raises(AdjustmentNotApplicable) as refused:
        adjustment_propose(actor=proposer, kind="leg_release", reason="impatient", refund_leg=leg)
    assert refused.value.details["allowed"] == []
    assert not Adjustment.objects.exists()


def test_a_duplicate_after_verified_is_money_and_resolved_by_recording_the_foreign_refund(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    """Someone also refunded the charge outside Vouch: the verified leg's monitoring escalates a
    duplicate side effect (money). The correction records the foreign refund (unspent -> refunded
    on that charge), so the ledger holds what the provider holds."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    leg = RefundLeg.objects.get()
    assert settle_runs()[leg.verification_run_id] == "VERIFIED"
    foreign = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 50})
    woken: list[tuple[int, str, str]] = []
    with time_machine.travel(timezone.now() + timedelta(minutes=5), tick=True):
        for event in sdk.v1.events.list(params={"type": "refund.created"}).data:
            payload = event.to_dict()
            stored, _ = provider_event_store(event=payload, raw=json.dumps(payload))
            provider_event_process(event_pk=stored.pk, enqueue=lambda *a: woken.append(a))
        assert (leg.verification_run_id, "", "monitor") in woken
        run_attempt(run_id=leg.verification_run_id, token="", trigger="monitor")
    # (The same event also opened reconciliation's `refund_foreign` on the funding leg, issue 37.)
    escalation = Escalation.objects.get(subject_type="refund_leg")
    assert escalation.verdict_class == "duplicate side effect"
    assert (escalation.subject_type, escalation.subject_id, escalation.money) == (
        "refund_leg",
        leg.public_id,
        True,
    )
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="A refund of 50 cents was made in the Dashboard.",
        escalation=escalation,
        provider_object_id=foreign.id,
    )
    assert adjustment.amount_micro == 500_000
    adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=500_000)
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (1_500_000, 3_500_000)
    assert FundingLeg.objects.get().refunded_micro == 1_500_000
    assert ledger_breaches() == []  # the recomputation from legs counts the recorded refund
    with pytest.raises(AdjustmentNotApplicable):  # the same provider refund never twice
        adjustment_propose(
            actor=proposer,
            kind="foreign_refund",
            reason="again",
            refund_leg=leg,
            provider_object_id=foreign.id,
        )


def test_an_unverifiable_charge_run_is_money(alice: Api, sandbox: SandboxControl) -> None:
    """The escalation of a funding charge's readback names the funding leg and is money."""
    from verification.services import escalation_open

    alice.create(5_000_000)
    run = VerificationRun.objects.get(contract_id="stripe.charge.succeeded")
    escalation = escalation_open(
        run=run, verdict="UNVERIFIABLE", verdict_class=None, reason="no readback"
    )
    funding = FundingLeg.objects.get()
    assert (escalation.subject_type, escalation.subject_id, escalation.money) == (
        "funding_leg",
        funding.public_id,
        True,
    )


def test_an_escalation_about_no_money_is_resolved_with_a_note(approver: User) -> None:
    from verification.services import escalation_open

    escalation = escalation_open(
        verdict="CONTRADICTED", verdict_class="something", reason="about no leg"
    )
    assert escalation.money is False
    resolved = escalation_resolve(escalation=escalation, actor=approver, note="checked")
    assert (resolved.status, resolved.resolution) == (EscalationStatus.RESOLVED, "note")
