"""The rules of the one adjustment service (SPEC §15.4), each on its own: which corrections fit a
leg as it stands, who may propose, approve and reject, what a proposal needs, what each kind of
correction checks at the provider and what it writes, and what the audit trail and the stored
provider reads say. (Issue 24, acceptance 3: these kill the mutants of envelopes/adjustments.py.)"""

from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.utils import timezone

from accounts.models import User
from core.exceptions import InvalidInput, PermissionDenied
from core.models import AuditEvent
from envelopes import services
from envelopes.adjustments import (
    adjustment_approve,
    adjustment_kinds_for,
    adjustment_propose,
    adjustment_reject,
    subject_of_escalation,
)
from envelopes.exceptions import (
    AdjustmentAlreadyDecided,
    AdjustmentAmountMismatch,
    AdjustmentNotApplicable,
    AdjustmentProviderMismatch,
    AdjustmentProviderUnreadable,
)
from envelopes.models import (
    Adjustment,
    AdjustmentStatus,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    ProviderRead,
    RefundLeg,
)
from envelopes.selectors import ledger_breaches
from envelopes.services import PROVIDER_KEY_TTL
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import LATER, later, person
from verification.models import EscalationStatus
from verification.services import escalation_open, escalation_resolve
from verification.subjects import Subject as EscalationSubject

pytestmark = pytest.mark.django_db


@pytest.fixture
def proposer(db: None) -> User:
    return person("pia", "envelopes.add_adjustment", "verification.resolve_escalation")


@pytest.fixture
def approver(db: None) -> User:
    return person("aron", "reconciliation.approve_adjustment", "envelopes.add_adjustment")


def _balances(envelope: Envelope | str) -> tuple[int, int, int, int]:
    public_id = envelope if isinstance(envelope, str) else envelope.public_id
    e = Envelope.objects.get(public_id=public_id)
    return e.total_funded_micro, e.total_refunded_micro, e.reserved_micro, e.unspent_micro


def _never_made_refund(alice: Api, sandbox: SandboxControl) -> RefundLeg:
    """A $2 refund of a $5 envelope whose every attempt failed before the provider applied it."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    return RefundLeg.objects.select_related("funding_leg", "operation__envelope").get()


def _accepted_leg(alice: Api, amount_micro: int = 2_000_000) -> RefundLeg:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": amount_micro})
    leg = RefundLeg.objects.select_related("funding_leg", "operation__envelope").get()
    assert leg.outcome == LegOutcome.ACCEPTED
    return leg


def _pending_top_up(alice: Api, sandbox: SandboxControl) -> FundingLeg:
    """A $3 top-up of a $5 envelope the provider never saw: a pending leg."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 3_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    funding = FundingLeg.objects.get(sequence=2)
    assert funding.status == FundingStatus.PENDING
    return funding


def _intent(sdk: stripe.StripeClient, amount: int, **params: Any) -> Any:
    return sdk.v1.payment_intents.create(
        params={
            "amount": amount,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
            **params,
        }
    )


# --- which corrections fit a leg --------------------------------------------------------------


def test_the_corrections_offered_follow_the_legs_state() -> None:
    now = timezone.now()
    old, young = now - LATER, now - timedelta(hours=1)

    def refund(outcome: str, reserved_at: Any = old, released: bool = False) -> list[str]:
        leg = RefundLeg(outcome=outcome, reserved_at=reserved_at, released=released)
        return [str(k) for k in adjustment_kinds_for(refund_leg=leg)]

    def funding(status: str, created_at: Any = old) -> list[str]:
        return [
            str(k)
            for k in adjustment_kinds_for(
                funding_leg=FundingLeg(status=status, created_at=created_at)
            )
        ]

    assert refund("reserved", young) == []  # Vouch may still send it
    assert refund("unknown", young) == []
    assert refund("reserved") == ["leg_release", "leg_accept"]
    assert refund("unknown") == ["leg_release", "leg_accept"]
    assert refund("accepted") == ["leg_reverse", "foreign_refund", "confirm"]
    assert refund("accepted", released=True) == ["confirm"]
    assert refund("refused", released=True) == ["confirm"]
    assert refund("void", released=True) == ["confirm"]
    assert funding("pending", young) == []
    assert funding("pending") == ["funding_accept", "funding_abandon"]
    assert funding("succeeded") == ["foreign_refund", "confirm"]
    assert funding("abandoned") == ["confirm"]
    assert adjustment_kinds_for() == []


def test_a_key_exactly_at_the_end_of_its_life_may_still_act() -> None:
    """The provider keeps a key for its whole life: at exactly PROVIDER_KEY_TTL nobody corrects
    the leg by hand yet; a moment later they may."""
    with time_machine.travel(timezone.now(), tick=False):
        edge = timezone.now() - PROVIDER_KEY_TTL
        leg = RefundLeg(outcome="unknown", reserved_at=edge)
        assert adjustment_kinds_for(refund_leg=leg) == []
        funding = FundingLeg(status="pending", created_at=edge)
        assert adjustment_kinds_for(funding_leg=funding) == []
        leg.reserved_at = funding.created_at = edge - timedelta(microseconds=1)
        assert adjustment_kinds_for(refund_leg=leg) == ["leg_release", "leg_accept"]
        assert adjustment_kinds_for(funding_leg=funding) == ["funding_accept", "funding_abandon"]


def test_an_escalation_names_the_leg_it_is_about(alice: Api, sandbox: SandboxControl) -> None:
    leg = _never_made_refund(alice, sandbox)
    about_leg = escalation_open(
        verdict="UNVERIFIABLE",
        verdict_class="x",
        reason="r",
        subject=EscalationSubject("refund_leg", leg.public_id, money=True),
    )
    subject = subject_of_escalation(about_leg)
    assert (subject.envelope.pk, subject.refund_leg, subject.funding_leg) == (
        leg.operation.envelope_id,
        leg,
        leg.funding_leg,
    )
    about_funding = escalation_open(
        verdict="UNVERIFIABLE",
        verdict_class="y",
        reason="r",
        subject=EscalationSubject("funding_leg", leg.funding_leg.public_id, money=True),
    )
    subject = subject_of_escalation(about_funding)
    assert (subject.envelope.pk, subject.refund_leg, subject.funding_leg) == (
        leg.operation.envelope_id,
        None,
        leg.funding_leg,
    )
    for kind, public_id in (("refund_leg", "rfl_nobody"), ("funding_leg", "fnd_nobody")):
        missing = escalation_open(
            verdict="UNVERIFIABLE",
            verdict_class=f"missing {kind}",
            reason="r",
            subject=EscalationSubject(kind, public_id, money=True),
        )
        with pytest.raises(AdjustmentNotApplicable) as refused:
            subject_of_escalation(missing)
        assert refused.value.details == {"escalation": missing.pk}
        assert refused.value.message == (
            "This escalation names no refund or funding leg: resolve it with a note."
        )


# --- what a proposal needs --------------------------------------------------------------------


def test_a_proposal_needs_the_permission_a_reason_a_known_kind_and_a_subject(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    nobody = person("nina")
    with later():
        with pytest.raises(PermissionDenied):
            adjustment_propose(actor=nobody, kind="leg_release", reason="x", refund_leg=leg)
        with pytest.raises(InvalidInput) as no_reason:
            adjustment_propose(actor=proposer, kind="leg_release", reason="  ", refund_leg=leg)
        assert no_reason.value.details == {"reason": []}
        assert no_reason.value.message == "Say why: a proposal needs a reason."
        with pytest.raises(InvalidInput) as bogus:
            adjustment_propose(actor=proposer, kind="bogus", reason="x", refund_leg=leg)
        assert "leg_release" in bogus.value.details["kind"]
        with pytest.raises(InvalidInput) as no_subject:
            adjustment_propose(actor=proposer, kind="leg_release", reason="x")
        assert no_subject.value.message == "Name an escalation, a refund leg or a funding leg."
        for kind, subject in (
            ("leg_accept", {"refund_leg": leg}),
            ("foreign_refund", {"funding_leg": leg.funding_leg}),
        ):
            with pytest.raises(InvalidInput) as unnamed:
                adjustment_propose(actor=proposer, kind=kind, reason="x", **subject)
            assert unnamed.value.details == {"provider_object_id": ["Required for this kind."]}
            assert unnamed.value.message == "Name the provider object this correction rests on."
        with pytest.raises(InvalidInput) as not_a_refund:
            adjustment_propose(
                actor=proposer,
                kind="leg_accept",
                reason="x",
                refund_leg=leg,
                provider_object_id=" pi_123 ",
            )
        assert not_a_refund.value.message == "Name the provider refund (re_…)."
        assert not_a_refund.value.details == {"provider_object_id": []}
        resolved = escalation_open(
            verdict="UNVERIFIABLE",
            verdict_class="c",
            reason="r",
            subject=EscalationSubject("refund_leg", leg.public_id, money=False),
        )
        resolved = escalation_resolve(escalation=resolved, actor=proposer, note="fine")
        with pytest.raises(AdjustmentNotApplicable) as closed:
            adjustment_propose(actor=proposer, kind="leg_release", reason="x", escalation=resolved)
        assert closed.value.message == "This escalation is resolved already."
    assert not Adjustment.objects.exists()
    assert not ProviderRead.objects.exists()  # nothing was asked of the provider


def test_a_funding_accept_needs_a_payment_intent_that_is_the_legs(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    funding = _pending_top_up(alice, sandbox)
    named_other = _intent(sdk, 300, metadata={"vouch_funding": "fnd_another"})
    unconfirmed = _intent(sdk, 300, confirm=False)
    smaller = _intent(sdk, 200)
    with later():

        def propose(intent_id: str) -> Any:
            with pytest.raises((AdjustmentProviderMismatch, InvalidInput)) as refused:
                adjustment_propose(
                    actor=proposer,
                    kind="funding_accept",
                    reason="x",
                    funding_leg=funding,
                    provider_object_id=intent_id,
                )
            return refused.value

        bad_id = propose("re_123")
        assert (bad_id.code, bad_id.message) == (
            "validation_error",
            "Name the PaymentIntent (pi_…).",
        )
        assert bad_id.details == {"provider_object_id": []}
        missing = propose("pi_nobody")
        assert (missing.code, missing.details) == (
            "adjustment_provider_mismatch",
            {"provider_object_id": "pi_nobody"},
        )
        assert propose(named_other.id).message == (
            f"PaymentIntent {named_other.id} names another funding leg (fnd_another)."
        )
        not_paid = propose(unconfirmed.id)
        assert not_paid.details == {"provider_status": unconfirmed.status}
        assert not_paid.message == (
            f"PaymentIntent {unconfirmed.id} is {unconfirmed.status}, not succeeded."
        )
        assert not_paid.code == "adjustment_provider_mismatch"
        other_amount = propose(smaller.id)
        assert other_amount.details == {"provider_amount": 200}
        assert other_amount.message == (
            f"PaymentIntent {smaller.id} is for 200 cents; the leg is for 300."
        )
    reads = list(ProviderRead.objects.order_by("id"))
    assert [r.shows["refused"] for r in reads] == ["adjustment_provider_mismatch"] * 4
    assert reads[1].shows["payment_intent"] == {
        "id": named_other.id,
        "status": "succeeded",
        "amount": 300,
    }
    assert funding.envelope.total_funded_micro == 5_000_000


def test_a_leg_accept_needs_the_legs_refund_for_its_amount_and_live(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    charge = leg.funding_leg.charge_id
    for_another = sdk.v1.refunds.create(
        params={"charge": charge, "amount": 200, "metadata": {"vouch_leg": "rfl_another"}}
    )
    smaller = sdk.v1.refunds.create(params={"charge": charge, "amount": 100})
    failed = sdk.v1.refunds.create(params={"charge": charge, "amount": 200})
    sandbox.set_refund_status(failed.id, "failed", "lost_or_stolen_card")
    with later():

        def propose(refund_id: str) -> AdjustmentProviderMismatch:
            with pytest.raises(AdjustmentProviderMismatch) as refused:
                adjustment_propose(
                    actor=proposer,
                    kind="leg_accept",
                    reason="x",
                    refund_leg=leg,
                    provider_object_id=refund_id,
                )
            return refused.value

        assert propose(for_another.id).message == (
            f"Refund {for_another.id} names another leg (rfl_another)."
        )
        other_amount = propose(smaller.id)
        assert other_amount.details == {"provider_amount": 100}
        assert other_amount.message == (
            f"Refund {smaller.id} is for 100 cents; the leg is for 200."
        )
        gone = propose(failed.id)
        assert gone.details == {"provider_status": "failed"}
        assert gone.message == f"Refund {failed.id} is failed: it gave nothing back."
        missing = propose("re_nobody")
        assert missing.details == {"provider_object_id": "re_nobody"}
    assert not Adjustment.objects.exists()
    assert _balances(leg.operation.envelope.public_id) == (5_000_000, 0, 2_000_000, 3_000_000)


def test_a_refund_on_another_charge_names_both_charges(
    alice: Api, sdk: stripe.StripeClient, proposer: User
) -> None:
    leg = _accepted_leg(alice)
    other_charge = alice.create(3_000_000)["funding_legs"][0]["charge"]
    elsewhere = sdk.v1.refunds.create(params={"charge": other_charge, "amount": 50})
    with pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer,
            kind="foreign_refund",
            reason="x",
            refund_leg=leg,
            provider_object_id=elsewhere.id,
        )
    assert refused.value.details == {"provider_charge": other_charge}
    assert refused.value.message == (
        f"Refund {elsewhere.id} is on charge {other_charge}, not on this leg's charge "
        f"{leg.funding_leg.charge_id}."
    )


def test_a_foreign_refund_carrying_vouchs_metadata_is_refused_unless_it_duplicates_a_leg(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    """A refund naming a leg that records another refund is a duplicate of it: money that left
    outside the leg, recorded like a foreign refund. One naming a leg that records none (or no
    leg at all) is Vouch's own, not foreign."""
    accepted = _accepted_leg(alice, 1_000_000)
    funding = accepted.funding_leg
    duplicate = sdk.v1.refunds.create(
        params={
            "charge": funding.charge_id,
            "amount": 50,
            "metadata": {"vouch_leg": accepted.public_id},
        }
    )
    no_such_leg = sdk.v1.refunds.create(
        params={"charge": funding.charge_id, "amount": 50, "metadata": {"vouch_leg": "rfl_x"}}
    )
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(
        f"/api/v1/escrow/envelopes/{accepted.operation.envelope.public_id}/refund",
        {"amount_micro": 1_000_000},
    )
    sandbox.clear_faults()
    unknown = RefundLeg.objects.get(outcome=LegOutcome.UNKNOWN)
    of_unknown = sdk.v1.refunds.create(
        params={
            "charge": funding.charge_id,
            "amount": 50,
            "metadata": {"vouch_leg": unknown.public_id},
        }
    )
    for refund in (no_such_leg, of_unknown):
        with pytest.raises(AdjustmentProviderMismatch) as refused:
            adjustment_propose(
                actor=proposer,
                kind="foreign_refund",
                reason="x",
                funding_leg=funding,
                provider_object_id=refund.id,
            )
        leg_named = refund.metadata["vouch_leg"]
        assert refused.value.message == (
            f"Refund {refund.id} carries Vouch's metadata (leg {leg_named}): it is not foreign."
        )
    with pytest.raises(AdjustmentProviderMismatch) as recorded:  # the leg's own refund
        adjustment_propose(
            actor=proposer,
            kind="foreign_refund",
            reason="x",
            funding_leg=funding,
            provider_object_id=accepted.provider_refund_id,
        )
    assert recorded.value.code == "provider_object_already_recorded"
    assert recorded.value.message == (
        f"Refund {accepted.provider_refund_id} is recorded on a refund leg already."
    )
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="A second refund of the leg.",
        funding_leg=funding,
        provider_object_id=duplicate.id,
    )
    assert adjustment.amount_micro == 500_000


def test_a_foreign_refund_the_envelope_cannot_absorb_is_not_applied(
    alice: Api, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    """Its amount must fit the unspent money (a debit keeps the charge's capacity but not the
    unspent money): exactly the unspent amount fits, a cent more does not."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    envelope = Envelope.objects.get(public_id=envelope_id)
    funding = FundingLeg.objects.get()
    services.debit_add(envelope=envelope, amount_micro=4_000_000, reference="job 1", actor=approver)
    too_much = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 101})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        funding_leg=funding,
        provider_object_id=too_much.id,
    )
    with pytest.raises(AdjustmentNotApplicable) as refused:
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=1_010_000)
    assert refused.value.details == {"unspent_micro": 1_000_000}
    adjustment_reject(adjustment=adjustment, actor=approver, note="too much")
    exact = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 100})
    fits = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        funding_leg=funding,
        provider_object_id=exact.id,
    )
    adjustment_approve(adjustment=fits, actor=approver, confirmed_amount_micro=1_000_000)
    assert _balances(envelope_id) == (5_000_000, 1_000_000, 0, 0)
    assert ledger_breaches() == []


def test_a_foreign_refund_beyond_what_is_left_of_its_charge_is_not_applied(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    """Money reserved on the charge (a refund in flight) is not left for a foreign refund, even
    when the envelope's unspent money (another charge's) could absorb it."""
    envelope_id = alice.create(2_000_000)["envelope_id"]
    original = FundingLeg.objects.get()
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_500_000})
    sandbox.clear_faults()
    alice.top_up(envelope_id, 5_000_000)
    assert _balances(envelope_id) == (7_000_000, 0, 1_500_000, 5_500_000)
    foreign = sdk.v1.refunds.create(params={"charge": original.charge_id, "amount": 60})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        funding_leg=original,
        provider_object_id=foreign.id,
    )
    with pytest.raises(AdjustmentNotApplicable):
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=600_000)
    assert _balances(envelope_id) == (7_000_000, 0, 1_500_000, 5_500_000)
    adjustment_reject(adjustment=adjustment, actor=approver, note="more than is left")
    exact = sdk.v1.refunds.create(params={"charge": original.charge_id, "amount": 50})
    fits = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        funding_leg=original,
        provider_object_id=exact.id,
    )
    adjustment_approve(adjustment=fits, actor=approver, confirmed_amount_micro=500_000)
    assert _balances(envelope_id) == (7_000_000, 500_000, 1_500_000, 5_000_000)
    original.refresh_from_db()
    assert original.capacity_micro == 0


# --- what each correction writes ---------------------------------------------------------------


def test_a_confirmation_moves_no_money_reads_nothing_and_journals_its_leg(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _accepted_leg(alice)
    before = _balances(leg.operation.envelope.public_id)
    calls = sandbox.state()["requests"]
    on_leg = adjustment_propose(
        actor=proposer, kind="confirm", reason="Looked: it is right.", refund_leg=leg
    )
    assert (on_leg.amount_micro, on_leg.proposal_read, on_leg.provider_object_id) == (0, None, "")
    adjustment_approve(adjustment=on_leg, actor=approver, confirmed_amount_micro=0)
    on_funding = adjustment_propose(
        actor=proposer, kind="confirm", reason="The charge is right.", funding_leg=leg.funding_leg
    )
    applied = adjustment_approve(adjustment=on_funding, actor=approver, confirmed_amount_micro=0)
    assert applied.approval_read is None
    assert sandbox.state()["requests"] == calls  # a confirmation asks the provider nothing
    assert _balances(leg.operation.envelope.public_id) == before
    entries = list(JournalEntry.objects.filter(kind="adjust").order_by("id"))
    assert [(e.refund_leg_id, e.funding_leg_id, e.provider_read_id) for e in entries] == [
        (leg.pk, None, None),
        (None, leg.funding_leg_id, None),
    ]
    assert [e.note for e in entries] == [
        f"confirm {on_leg.public_id}",
        f"confirm {on_funding.public_id}",
    ]
    assert all(
        (e.funded_delta, e.refunded_delta, e.reserved_delta, e.unspent_delta) == (0, 0, 0, 0)
        for e in entries
    )


def test_accepting_a_stuck_leg_moves_reserved_to_refunded_and_starts_its_readback(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    by_hand = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 200})
    with later():
        adjustment = adjustment_propose(
            actor=proposer,
            kind="leg_accept",
            reason="by hand",
            refund_leg=leg,
            provider_object_id=by_hand.id,
        )
        applied = adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
        )
    leg.refresh_from_db()
    assert (leg.outcome, leg.provider_refund_id, leg.error_code) == (
        LegOutcome.ACCEPTED,
        by_hand.id,
        "",
    )
    assert leg.decided_at is not None
    run = leg.verification_run
    assert run is not None
    assert (run.contract_id, run.operation_id) == ("stripe.refund.created", leg.idempotency_key)
    assert run.input == {"charge": leg.funding_leg.charge_id, "amount": 200}
    funding = FundingLeg.objects.get()
    assert (funding.reserved_micro, funding.refunded_micro) == (0, 2_000_000)
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.refund_leg_id, entry.funding_leg_id, entry.reserved_delta) == (
        leg.pk,
        None,
        -2_000_000,
    )
    assert entry.provider_read_id == applied.approval_read_id
    assert applied.provider_object["id"] == by_hand.id
    assert applied.approval_read is not None
    assert applied.approval_read.shows == {
        "refund": {"id": by_hand.id, "status": "succeeded", "amount": 200}
    }
    assert ledger_breaches() == []


def test_a_release_voids_the_leg_and_frees_its_funding(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="none", refund_leg=leg
        )
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000)
    leg.refresh_from_db()
    assert (leg.outcome, leg.released, leg.error_code) == (
        LegOutcome.VOID,
        True,
        "not_at_provider",
    )
    assert leg.decided_at is not None
    funding = FundingLeg.objects.get()
    assert (funding.reserved_micro, funding.refunded_micro) == (0, 0)
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.refund_leg_id, entry.funding_leg_id) == (leg.pk, None)
    assert entry.note == f"leg_release {adjustment.public_id}"


# --- deciding -------------------------------------------------------------------------------


def test_an_approval_needs_the_exact_integer_amount_and_an_undecided_proposal(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="x", refund_leg=leg
        )
        for wrong in (True, "2000000", 2_000_000.0, 1_999_999, None):
            with pytest.raises(AdjustmentAmountMismatch) as refused:
                adjustment_approve(
                    adjustment=adjustment, actor=approver, confirmed_amount_micro=wrong
                )
            assert refused.value.details == {"amount_micro": 2_000_000, "confirmed": wrong}
        applied = adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000, note=" ok "
        )
        assert (applied.status, applied.decided_by, applied.decision_note) == (
            AdjustmentStatus.APPLIED,
            approver,
            "ok",
        )
        assert applied.decided_at is not None
        with pytest.raises(AdjustmentAlreadyDecided) as twice:
            adjustment_approve(adjustment=applied, actor=approver, confirmed_amount_micro=2_000_000)
        assert twice.value.details == {"status": "applied"}
        stale = Adjustment.objects.get(pk=adjustment.pk)
        stale.status = AdjustmentStatus.PROPOSED  # a page shown before it was approved
        with pytest.raises(AdjustmentAlreadyDecided) as meanwhile:
            adjustment_approve(adjustment=stale, actor=approver, confirmed_amount_micro=2_000_000)
        assert meanwhile.value.details == {"status": "applied"}
    assert JournalEntry.objects.filter(kind="adjust").count() == 1


def test_an_approval_resolves_the_escalation_with_what_was_done(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    escalation = escalation_open(
        verdict="UNVERIFIABLE",
        verdict_class="not at the provider",
        reason="r",
        subject=EscalationSubject("refund_leg", leg.public_id, money=True),
    )
    with later():
        adjustment = adjustment_propose(
            actor=proposer,
            kind="leg_release",
            reason="Not in the Dashboard.",
            escalation=escalation,
        )
        adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000, note="seen"
        )
    escalation.refresh_from_db()
    assert (escalation.status, escalation.resolution, escalation.resolved_by) == (
        EscalationStatus.RESOLVED,
        "adjusted",
        approver,
    )
    assert escalation.resolution_note == (
        f"Adjusted by {adjustment.public_id} (leg_release, 2,000,000 micro), proposed by "
        f"{proposer}: Not in the Dashboard. Approved: seen"
    )


def test_the_provider_showing_another_amount_at_approval_stops_it(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    leg = _accepted_leg(alice)
    foreign = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 50})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        refund_leg=leg,
        provider_object_id=foreign.id,
    )
    sandbox.tamper(foreign.id, amount=70)
    with pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=500_000)
    assert refused.value.message == (
        "The provider now shows another amount than when this was proposed."
    )
    assert Adjustment.objects.get().status == AdjustmentStatus.PROPOSED


def test_rejecting_needs_a_note_and_the_permission_and_moves_nothing(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    with later():
        first = adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
        with pytest.raises(PermissionDenied):
            adjustment_reject(adjustment=first, actor=person("nina"), note="no")
        with pytest.raises(InvalidInput) as no_note:
            adjustment_reject(adjustment=first, actor=approver, note="  ")
        assert no_note.value.details == {"note": []}
        assert no_note.value.message == "Say why: a rejection needs a note."
        rejected = adjustment_reject(adjustment=first, actor=approver, note=" The refund exists. ")
        assert (rejected.status, rejected.decided_by, rejected.decision_note) == (
            AdjustmentStatus.REJECTED,
            approver,
            "The refund exists.",
        )
        assert rejected.decided_at is not None
        with pytest.raises(AdjustmentAlreadyDecided) as again:
            adjustment_reject(adjustment=first, actor=approver, note="again")
        assert again.value.details == {"status": "rejected"}
        second = adjustment_propose(actor=proposer, kind="leg_release", reason="y", refund_leg=leg)
        withdrawn = adjustment_reject(adjustment=second, actor=proposer, note="my mistake")
        assert (withdrawn.status, withdrawn.decided_by) == (AdjustmentStatus.REJECTED, proposer)
    event = AuditEvent.objects.filter(action="adjustment.reject").order_by("id").first()
    assert event is not None
    # A change of status (core.transitions): the row names the adjustment, the move, its envelope.
    assert (event.target_type, event.target_id) == ("adjustment", first.public_id)
    assert (event.details["from"], event.details["to"]) == ("proposed", "rejected")
    assert event.details["envelope"] == leg.operation.envelope.public_id
    assert event.details["note"] == "The refund exists."
    assert event.details["adjustment"] == first.public_id
    assert _balances(leg.operation.envelope.public_id) == (5_000_000, 0, 2_000_000, 3_000_000)


def test_the_audit_trail_names_the_adjustment_its_legs_and_what_was_confirmed(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="x", refund_leg=leg
        )
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000)
    expected = {
        "adjustment": adjustment.public_id,
        "kind": "leg_release",
        "amount_micro": 2_000_000,
        "refund_leg": leg.public_id,
        "funding_leg": None,
        "provider_object_id": None,
        "escalation": None,
    }
    propose = AuditEvent.objects.get(action="adjustment.propose")
    approve = AuditEvent.objects.get(action="adjustment.approve")
    assert (propose.actor, approve.actor) == (proposer, approver)
    assert (propose.target_type, propose.target_id) == (
        "envelope",
        leg.operation.envelope.public_id,
    )
    assert propose.details == expected
    assert approve.details == {
        "from": "proposed",
        "to": "applied",
        "envelope": leg.operation.envelope.public_id,
        **expected,
        "confirmed_amount_micro": 2_000_000,
    }
    assert (approve.target_type, approve.target_id) == ("adjustment", adjustment.public_id)


def test_a_funding_adjustment_is_audited_with_its_funding_leg_and_provider_object(
    alice: Api, sdk: stripe.StripeClient, proposer: User
) -> None:
    alice.create(5_000_000)
    funding = FundingLeg.objects.get()
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 50})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        funding_leg=funding,
        provider_object_id=foreign.id,
    )
    assert AuditEvent.objects.get(action="adjustment.propose").details == {
        "adjustment": adjustment.public_id,
        "kind": "foreign_refund",
        "amount_micro": 500_000,
        "refund_leg": None,
        "funding_leg": funding.public_id,
        "provider_object_id": foreign.id,
        "escalation": None,
    }


# --- the reads behind a release, a reverse and an abandon ---------------------------------------


def test_a_reverse_of_a_leg_whose_refund_failed_is_applied_and_reads_it_by_its_id(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _accepted_leg(alice)
    sandbox.tamper(leg.provider_refund_id, status="failed")  # no event: nothing released it yet
    adjustment = adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    read = adjustment.proposal_read
    assert read is not None
    assert (read.purpose, read.kind, read.subject) == (
        "adjustment.propose",
        "leg_reverse",
        leg.public_id,
    )
    assert read.envelope_id == leg.operation.envelope_id
    assert read.shows == {
        "recorded_refund": {"id": leg.provider_refund_id, "found": True},
        "refunds": [{"id": leg.provider_refund_id, "status": "failed", "amount": 200}],
    }
    by_id, charge, listing = read.answers.all()
    assert (by_id.request, by_id.outcome, by_id.http_status) == (
        {"method": "GET", "path": f"/v1/refunds/{leg.provider_refund_id}"},
        "accepted",
        200,
    )
    assert by_id.answer()["status"] == "failed"
    assert charge.request == {"method": "GET", "path": f"/v1/charges/{leg.funding_leg.charge_id}"}
    assert (listing.request, listing.outcome, listing.http_status) == (
        {
            "method": "GET",
            "path": "/v1/refunds",
            "params": {"charge": leg.funding_leg.charge_id, "limit": 100},
        },
        "accepted",
        200,
    )
    adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000)
    assert _balances(leg.operation.envelope.public_id) == (5_000_000, 0, 0, 5_000_000)


def test_a_reverse_is_refused_when_the_recorded_refund_cannot_be_read(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    leg = _accepted_leg(alice)
    sandbox.add_fault(f"/v1/refunds/{leg.provider_refund_id}", "server_error", method="GET")
    with pytest.raises(AdjustmentProviderUnreadable) as refused:
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    assert refused.value.details == {"provider_code": "server_error"}
    assert refused.value.message == (
        "The provider could not be read (An unknown error occurred); nothing was changed. "
        "Try again."
    )
    read = ProviderRead.objects.get()
    assert read.shows == {"refused": "adjustment_provider_unreadable"}
    (answer,) = read.answers.all()
    assert (answer.outcome, answer.http_status) == ("unknown", 500)
    assert answer.answer()["error"]["code"] == "server_error"


def test_a_release_is_refused_when_the_provider_does_not_hold_the_charge(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    sandbox.forget(leg.funding_leg.charge_id)
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
    assert refused.value.code == "provider_shows_no_charge"
    assert refused.value.details == {"charge": leg.funding_leg.charge_id}


def test_a_release_is_refused_when_the_charge_cannot_be_read(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    sandbox.add_fault("/v1/charges/*", "server_error", method="GET")
    with later(), pytest.raises(AdjustmentProviderUnreadable):
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)


def test_a_release_is_refused_when_the_charges_refunds_cannot_be_listed(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    with later(), pytest.raises(AdjustmentProviderUnreadable) as refused:
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
    assert refused.value.details == {"provider_code": "server_error"}
    read = ProviderRead.objects.get()
    charge, listing = read.answers.all()
    assert charge.outcome == "accepted"
    assert (listing.outcome, listing.request) == (
        "unknown",
        {
            "method": "GET",
            "path": "/v1/refunds",
            "params": {"charge": leg.funding_leg.charge_id, "limit": 100},
        },
    )


def test_refund_refusals_name_the_refunds_and_their_statuses(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    leg = _accepted_leg(alice)
    with pytest.raises(AdjustmentProviderMismatch) as succeeded:
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    assert succeeded.value.details == {
        "charge": leg.funding_leg.charge_id,
        "refunds": {leg.provider_refund_id: "succeeded"},
    }
    assert f"({leg.provider_refund_id} succeeded)" in succeeded.value.message
    sandbox.tamper(leg.provider_refund_id, status="requires_action")
    other = sdk.v1.refunds.create(
        params={
            "charge": leg.funding_leg.charge_id,
            "amount": 100,
            "metadata": {"vouch_leg": leg.public_id},
        }
    )
    sandbox.tamper(other.id, status="pending")
    with pytest.raises(AdjustmentProviderMismatch) as in_flight:
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    assert in_flight.value.code == "provider_shows_refund_in_flight"
    assert in_flight.value.details["refunds"] == {
        leg.provider_refund_id: "requires_action",
        other.id: "pending",
    }
    assert (
        f"({leg.provider_refund_id} requires_action, {other.id} pending)" in in_flight.value.message
    )


def _with_known_intent(funding: FundingLeg, intent_id: str) -> FundingLeg:
    """The leg as a request that got the PaymentIntent's answer (still on its way) records it."""
    FundingLeg.objects.filter(pk=funding.pk).update(payment_intent_id=intent_id)
    return FundingLeg.objects.select_related("envelope").get(pk=funding.pk)


def test_an_abandon_reads_the_recorded_payment_intent_by_its_id(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    """A PaymentIntent found by its id counts whatever its metadata says; one the provider does
    not hold (404) is no payment; one still taking money stops the abandon; a failed one does
    not."""
    funding = _pending_top_up(alice, sandbox)
    intent = _intent(sdk, 300)  # no Vouch metadata: the search cannot find it
    funding = _with_known_intent(funding, intent.id)
    with later():
        with pytest.raises(AdjustmentProviderMismatch) as paid:
            adjustment_propose(
                actor=proposer, kind="funding_abandon", reason="x", funding_leg=funding
            )
        assert paid.value.code == "provider_shows_payment_succeeded"
        assert paid.value.details == {"payment_intents": {intent.id: "succeeded"}}
        for status in ("processing", "requires_capture", "requires_action"):
            sandbox.tamper(intent.id, status=status)
            with pytest.raises(AdjustmentProviderMismatch) as in_flight:
                adjustment_propose(
                    actor=proposer, kind="funding_abandon", reason="x", funding_leg=funding
                )
            assert in_flight.value.code == "provider_shows_payment_in_flight"
            assert f"({intent.id} {status})" in in_flight.value.message
        sandbox.tamper(intent.id, status="requires_payment_method")
        adjustment = adjustment_propose(
            actor=proposer, kind="funding_abandon", reason="declined", funding_leg=funding
        )
        assert adjustment.proposal_read is not None
        assert adjustment.proposal_read.shows["payment_intents"] == [
            {"id": intent.id, "status": "requires_payment_method", "amount": 300}
        ]
        by_id, search = adjustment.proposal_read.answers.all()
        assert by_id.request == {"method": "GET", "path": f"/v1/payment_intents/{intent.id}"}
        assert search.request == {
            "method": "GET",
            "path": "/v1/payment_intents/search",
            "params": {"query": f"metadata['vouch_funding']:'{funding.public_id}'", "limit": 100},
        }
        adjustment_reject(adjustment=adjustment, actor=proposer, note="try the 404")
        sandbox.forget(intent.id)
        forgotten = adjustment_propose(
            actor=proposer, kind="funding_abandon", reason="gone", funding_leg=funding
        )
        adjustment_approve(adjustment=forgotten, actor=approver, confirmed_amount_micro=0)
    funding.refresh_from_db()
    assert funding.status == FundingStatus.ABANDONED


def test_an_abandon_is_refused_when_the_recorded_payment_intent_cannot_be_read(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    funding = _with_known_intent(_pending_top_up(alice, sandbox), _intent(sdk, 300).id)
    sandbox.add_fault("/v1/payment_intents/pi_*", "server_error", method="GET")
    with later(), pytest.raises(AdjustmentProviderUnreadable):
        adjustment_propose(actor=proposer, kind="funding_abandon", reason="x", funding_leg=funding)
    funding.refresh_from_db()
    assert funding.status == FundingStatus.PENDING


def test_a_funding_accept_refuses_a_charge_recorded_on_another_leg(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    """Recorded elsewhere by its charge alone (that leg recorded the charge, another intent)."""
    funding = _pending_top_up(alice, sandbox)
    original = FundingLeg.objects.get(sequence=1)
    intent = _intent(sdk, 300)
    FundingLeg.objects.filter(pk=original.pk).update(
        charge_id=intent.latest_charge, payment_intent_id="pi_other"
    )
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer,
            kind="funding_accept",
            reason="x",
            funding_leg=funding,
            provider_object_id=intent.id,
        )
    assert refused.value.code == "provider_object_already_recorded"
    assert refused.value.details == {"funding_leg": original.public_id}


def test_a_refusal_other_than_not_found_is_no_proof_that_a_refund_is_gone(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    """Only a 404 says the provider holds no such refund (or PaymentIntent); a 400 says nothing."""
    leg = _accepted_leg(alice)
    sandbox.forget(leg.provider_refund_id)
    sandbox.add_fault(
        f"/v1/refunds/{leg.provider_refund_id}", "refuse", method="GET", error_code="bad_request"
    )
    with pytest.raises(AdjustmentProviderUnreadable) as refused:
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    assert refused.value.details == {"provider_code": "bad_request"}
    (answer,) = ProviderRead.objects.get().answers.all()
    assert (answer.outcome, answer.http_status) == ("refused", 400)
    assert not Adjustment.objects.exists()


def test_an_abandon_is_refused_when_the_payment_intent_says_nothing_but_a_400(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    funding = _with_known_intent(_pending_top_up(alice, sandbox), _intent(sdk, 300).id)
    sandbox.add_fault(
        f"/v1/payment_intents/{funding.payment_intent_id}",
        "refuse",
        method="GET",
        error_code="bad_request",
    )
    with later(), pytest.raises(AdjustmentProviderUnreadable):
        adjustment_propose(actor=proposer, kind="funding_abandon", reason="x", funding_leg=funding)


def test_a_refund_someone_else_made_on_the_charge_does_not_stop_a_release(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    """Only refunds carrying the leg count: a Dashboard refund on the same charge is another
    matter (a foreign refund, recorded on its own)."""
    leg = _never_made_refund(alice, sandbox)
    foreign = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 100})
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="x", refund_leg=leg
        )
    assert adjustment.proposal_read is not None
    assert adjustment.proposal_read.shows == {"refunds": []}
    listing = adjustment.proposal_read.answers.get(request__path="/v1/refunds")
    assert [r["id"] for r in listing.answer()["data"]] == [foreign.id]  # seen, and not counted


def test_missing_words_are_refused_like_empty_ones(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    """A reason, a provider object or a note given as nothing at all (None) is refused as an empty
    one is."""
    leg = _never_made_refund(alice, sandbox)
    with later():
        with pytest.raises(InvalidInput) as no_reason:
            adjustment_propose(
                actor=proposer,
                kind="leg_release",
                reason=None,  # type: ignore[arg-type]
                refund_leg=leg,
            )
        assert no_reason.value.details == {"reason": []}
        with pytest.raises(InvalidInput) as no_object:
            adjustment_propose(
                actor=proposer,
                kind="leg_accept",
                reason="x",
                refund_leg=leg,
                provider_object_id=None,  # type: ignore[arg-type]
            )
        assert no_object.value.details == {"provider_object_id": ["Required for this kind."]}
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="x", refund_leg=leg
        )
        with pytest.raises(InvalidInput):
            adjustment_reject(
                adjustment=adjustment,
                actor=approver,
                note=None,  # type: ignore[arg-type]
            )
    assert Adjustment.objects.get().status == AdjustmentStatus.PROPOSED


def test_one_proposal_waits_per_leg(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
        with pytest.raises(AdjustmentNotApplicable) as second:
            adjustment_propose(actor=approver, kind="leg_release", reason="y", refund_leg=leg)
    assert second.value.message == (
        "Another adjustment of this leg is waiting for approval, or this provider object is "
        "named by another adjustment already."
    )
    assert Adjustment.objects.count() == 1


def test_a_correction_that_does_not_fit_says_what_the_leg_allows(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    leg = _never_made_refund(alice, sandbox)
    with pytest.raises(AdjustmentNotApplicable) as young:
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
    assert young.value.message == (
        f"A leg_release adjustment does not fit {leg.public_id} as it stands (unknown). It "
        "allows: nothing yet: Vouch may still use its idempotency key; wait until it expires."
    )
    with pytest.raises(AdjustmentNotApplicable) as funded:
        adjustment_propose(
            actor=proposer, kind="funding_abandon", reason="x", funding_leg=leg.funding_leg
        )
    assert funded.value.message == (
        f"A funding_abandon adjustment does not fit {leg.funding_leg.public_id} as it stands "
        "(succeeded). It allows: foreign_refund, confirm."
    )
    assert funded.value.details == {
        "kind": "funding_abandon",
        "allowed": ["foreign_refund", "confirm"],
    }


def test_a_foreign_refund_recorded_on_a_refund_leg_moves_its_funding_legs_money(
    alice: Api, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    """Proposed from the leg (a duplicate of its refund), it is written on the funding leg: the
    journal names the funding leg, not the refund leg."""
    leg = _accepted_leg(alice)
    foreign = sdk.v1.refunds.create(params={"charge": leg.funding_leg.charge_id, "amount": 50})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="x",
        refund_leg=leg,
        provider_object_id=foreign.id,
    )
    assert (adjustment.refund_leg, adjustment.funding_leg) == (leg, None)
    adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=500_000)
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.refund_leg_id, entry.funding_leg_id) == (None, leg.funding_leg_id)
    assert (entry.refunded_delta, entry.unspent_delta) == (500_000, -500_000)
    assert FundingLeg.objects.get().refunded_micro == 2_500_000
    leg.refresh_from_db()
    assert (leg.outcome, leg.released) == (LegOutcome.ACCEPTED, False)  # the leg is untouched
    assert ledger_breaches() == []
