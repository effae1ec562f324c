"""No correction against the provider's word (issue 24, items 1-4; SPEC §2, §15.4). Every
adjustment that moves money reads the provider when it is proposed and again when it is approved,
stores each read (the answers' bytes and their SHA-256), cites the approval's read on the journal
entry it writes, and is refused — with a code that says what the provider shows — when the
provider contradicts it. A foreign refund recorded by adjustment that the provider later shows
failed or canceled is given back once, through the one release service."""

import hashlib
import json
import re
from typing import Any

import pytest
import stripe
from django.contrib.auth.models import Permission

from accounts.models import User
from envelopes import services
from envelopes.adjustments import adjustment_approve, adjustment_propose
from envelopes.exceptions import (
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
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import later, person
from verification.models import VerificationRun
from verification.services import provider_event_process, provider_event_store

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


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)


def _balances(envelope_id: str) -> tuple[int, int, int]:
    envelope = Envelope.objects.get(public_id=envelope_id)
    return envelope.total_refunded_micro, envelope.reserved_micro, envelope.unspent_micro


# --- item 4: a recorded foreign refund that fails later is given back, once ------------------


def _recorded_foreign_refund(
    alice: Api, sdk: stripe.StripeClient, proposer: User, approver: User
) -> tuple[str, FundingLeg, str, Adjustment]:
    """A $5 envelope, and a 50-cent refund made in the Dashboard, recorded by an adjustment."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    funding = FundingLeg.objects.get()
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 50})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="A refund of 50 cents was made in the Dashboard.",
        funding_leg=funding,
        provider_object_id=foreign.id,
    )
    applied = adjustment_approve(
        adjustment=adjustment, actor=approver, confirmed_amount_micro=500_000
    )
    assert applied.status == AdjustmentStatus.APPLIED
    assert _balances(envelope_id) == (500_000, 0, 4_500_000)
    return envelope_id, funding, foreign.id, applied


def _assert_given_back_once(envelope_id: str, funding: FundingLeg, adjustment: Adjustment) -> None:
    assert _balances(envelope_id) == (0, 0, 5_000_000)
    funding.refresh_from_db()
    assert funding.refunded_micro == 0
    releases = JournalEntry.objects.filter(kind="release", adjustment=adjustment)
    assert [(e.refunded_delta, e.unspent_delta) for e in releases] == [(-500_000, 500_000)]
    assert ledger_breaches() == []


def test_a_recorded_foreign_refund_that_fails_later_is_given_back_by_its_webhook(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed", "lost_or_stolen_card")
    for event_type in ("refund.failed", "refund.updated", "charge.refund.updated"):
        for event in sdk.v1.events.list(params={"type": event_type}).data:
            _deliver(event.to_dict())  # three events of one failure, and each one twice
            _deliver({**event.to_dict(), "id": f"{event.id}_again"})
    _assert_given_back_once(envelope_id, funding, adjustment)
    adjustment.refresh_from_db()
    assert adjustment.released_at is not None


def test_a_recorded_foreign_refund_that_fails_later_is_given_back_by_charge_refunded(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    """The refund's own events were lost; the `charge.refunded` re-read is enough."""
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed", "expired_or_canceled_card")
    _deliver(
        {
            "id": "evt_only_charge_refunded",
            "type": "charge.refunded",
            "created": 1,
            "data": {"object": {"id": funding.charge_id, "object": "charge"}},
        }
    )
    _assert_given_back_once(envelope_id, funding, adjustment)
    [entry] = JournalEntry.objects.filter(kind="release", adjustment=adjustment)
    assert entry.note.endswith("(charge.refunded evt_only_charge_refunded)")  # who saw it


def test_foreign_refund_release_gives_a_failed_recorded_refund_back_once(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    """The service reconciliation calls: given the provider's refund, never calling it."""
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    live = sdk.v1.refunds.retrieve(refund_id).to_dict()
    assert services.foreign_refund_release(provider_refund=live, source="test") is False
    assert _balances(envelope_id) == (500_000, 0, 4_500_000)  # succeeded: nothing to give back
    sandbox.set_refund_status(refund_id, "failed", "lost_or_stolen_card")
    failed = sdk.v1.refunds.retrieve(refund_id).to_dict()
    calls = sandbox.state()["requests"]
    assert services.foreign_refund_release(provider_refund=failed, source="reconciliation")
    assert not services.foreign_refund_release(provider_refund=failed, source="webhook")
    assert sandbox.state()["requests"] == calls  # it never called the provider
    _assert_given_back_once(envelope_id, funding, adjustment)
    unknown = {**failed, "id": "re_nobody_recorded"}
    assert services.foreign_refund_release(provider_refund=unknown, source="test") is False
    entry = JournalEntry.objects.get(kind="release", adjustment=adjustment)
    assert entry.funding_leg_id == funding.pk
    assert "reconciliation" in entry.note
    # The release cites what it acted on: the provider's refund, stored with its SHA-256.
    read = entry.provider_read
    assert read is not None
    assert read.answers.get().answer()["status"] == "failed"


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


# --- item 1: the release of a stuck leg that the provider did refund --------------------------


def _lost_answer_refund(alice: Api, sandbox: SandboxControl) -> tuple[str, RefundLeg]:
    """A $2 refund of a $5 envelope that the provider made, whose every answer was lost: the leg
    is `unknown`, its money reserved."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    assert sandbox.state()["counts"]["refunds"] == 1  # made, at the provider
    leg = RefundLeg.objects.get()
    assert leg.outcome == LegOutcome.UNKNOWN
    return envelope_id, leg


def _never_made_refund(alice: Api, sandbox: SandboxControl) -> tuple[str, RefundLeg]:
    """A $2 refund whose every attempt failed before the provider applied anything."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    assert sandbox.state()["counts"]["refunds"] == 0
    return envelope_id, RefundLeg.objects.get()


def test_releasing_a_stuck_leg_the_provider_refunded_is_refused_with_what_it_shows(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    envelope_id, leg = _lost_answer_refund(alice, sandbox)
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer,
            kind="leg_release",
            reason="No refund in the Dashboard, I think.",
            refund_leg=leg,
        )
    assert refused.value.code == "provider_shows_refund_succeeded"
    assert not Adjustment.objects.exists()
    assert _balances(envelope_id) == (0, 2_000_000, 3_000_000)  # nothing moved
    # The read behind the refusal is kept: the charge's refunds, as the provider answered.
    read = ProviderRead.objects.get(purpose="adjustment.propose")
    assert read.subject == leg.public_id
    assert [r["status"] for r in read.shows["refunds"]] == ["succeeded"]
    assert _answers_hold_their_sha256(read)


def test_a_refund_carrying_the_leg_made_after_the_proposal_stops_its_release(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    """The approval reads the provider again: what it shows then decides."""
    envelope_id, leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="Nothing at Stripe.", refund_leg=leg
        )
        sdk.v1.refunds.create(
            params={
                "charge": leg.funding_leg.charge_id,
                "amount": 200,
                "metadata": {"vouch_leg": leg.public_id},
            }
        )
        with pytest.raises(AdjustmentProviderMismatch) as refused:
            adjustment_approve(
                adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
            )
    assert refused.value.code == "provider_shows_refund_succeeded"
    adjustment.refresh_from_db()
    assert adjustment.status == AdjustmentStatus.PROPOSED
    assert _balances(envelope_id) == (0, 2_000_000, 3_000_000)
    assert not JournalEntry.objects.filter(kind="adjust").exists()


def test_a_release_cites_the_reads_made_when_proposed_and_when_approved(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    envelope_id, leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="Nothing at Stripe.", refund_leg=leg
        )
        applied = adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
        )
    assert _balances(envelope_id) == (0, 0, 5_000_000)
    proposal, approval = applied.proposal_read, applied.approval_read
    assert proposal is not None
    assert approval is not None
    assert proposal.pk != approval.pk
    assert (proposal.purpose, approval.purpose) == ("adjustment.propose", "adjustment.approve")
    for read in (proposal, approval):
        assert read.shows["refunds"] == []
        charge, listing = read.answers.all()  # the charge is there; none of its refunds
        assert charge.request["path"] == f"/v1/charges/{leg.funding_leg.charge_id}"
        assert charge.answer()["amount_refunded"] == 0
        assert listing.request["path"] == "/v1/refunds"
        assert listing.request["params"]["charge"] == leg.funding_leg.charge_id
        assert listing.answer()["data"] == []
        assert _answers_hold_their_sha256(read)
    entry = JournalEntry.objects.get(kind="adjust")
    assert entry.provider_read_id == approval.pk  # the journal entry cites the provider's word
    assert ledger_breaches() == []


def test_a_leg_whose_refund_failed_at_the_provider_may_be_released(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    envelope_id, leg = _lost_answer_refund(alice, sandbox)
    (made,) = sdk.v1.refunds.list(params={"charge": leg.funding_leg.charge_id}).data
    refund_id = made.id
    sandbox.set_refund_status(refund_id, "failed", "lost_or_stolen_card")
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="It failed.", refund_leg=leg
        )
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000)
    assert _balances(envelope_id) == (0, 0, 5_000_000)
    read = Adjustment.objects.get(pk=adjustment.pk).approval_read
    assert read is not None
    assert read.shows["refunds"] == [{"id": refund_id, "status": "failed", "amount": 200}]
    assert ledger_breaches() == []


def test_an_unreadable_provider_stops_a_release_and_changes_nothing(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    envelope_id, leg = _never_made_refund(alice, sandbox)
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    with later(), pytest.raises(AdjustmentProviderUnreadable):
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
    assert not Adjustment.objects.exists()
    assert _balances(envelope_id) == (0, 2_000_000, 3_000_000)


# --- item 2: the reverse of an accepted leg whose refund succeeded ---------------------------


def _accepted_leg(alice: Api) -> tuple[str, RefundLeg]:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    leg = RefundLeg.objects.get()
    assert leg.outcome == LegOutcome.ACCEPTED
    return envelope_id, leg


def test_reversing_a_leg_whose_refund_succeeded_is_refused(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    envelope_id, leg = _accepted_leg(alice)
    with pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer, kind="leg_reverse", reason="Looks wrong.", refund_leg=leg
        )
    assert refused.value.code == "provider_shows_refund_succeeded"
    assert not Adjustment.objects.exists()
    assert _balances(envelope_id) == (2_000_000, 0, 3_000_000)


def test_a_refund_still_in_flight_stops_a_reverse(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    _, leg = _accepted_leg(alice)
    sandbox.tamper(leg.provider_refund_id, status="pending")
    with pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    assert refused.value.code == "provider_shows_refund_in_flight"


def test_a_leg_reversal_moves_its_money_from_refunded_back_to_unspent(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    """The provider holds no such refund (a 404 for the id it gave, and none of the charge's
    refunds carries the leg): the reverse is applied, and its money goes the right way."""
    envelope_id, leg = _accepted_leg(alice)
    sandbox.forget(leg.provider_refund_id)
    adjustment = adjustment_propose(
        actor=proposer, kind="leg_reverse", reason="Stripe holds no such refund.", refund_leg=leg
    )
    assert adjustment.amount_micro == 2_000_000
    applied = adjustment_approve(
        adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
    )
    assert _balances(envelope_id) == (0, 0, 5_000_000)
    leg.refresh_from_db()
    assert (leg.outcome, leg.released) == (LegOutcome.ACCEPTED, True)
    assert FundingLeg.objects.get().refunded_micro == 0
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.refund_leg_id, entry.refunded_delta, entry.unspent_delta) == (
        leg.pk,
        -2_000_000,
        2_000_000,
    )
    assert entry.provider_read_id == applied.approval_read_id
    shown = applied.approval_read.shows
    assert shown["recorded_refund"] == {"id": leg.provider_refund_id, "found": False}
    assert ledger_breaches() == []
    with pytest.raises(AdjustmentNotApplicable):  # released: nothing left to reverse
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="again", refund_leg=leg)


def test_another_refund_carrying_the_leg_stops_its_reverse(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    _, leg = _accepted_leg(alice)
    sandbox.forget(leg.provider_refund_id)
    sdk.v1.refunds.create(
        params={
            "charge": leg.funding_leg.charge_id,
            "amount": 200,
            "metadata": {"vouch_leg": leg.public_id},
        }
    )
    with pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(actor=proposer, kind="leg_reverse", reason="x", refund_leg=leg)
    assert refused.value.code == "provider_shows_refund_succeeded"


# --- item 3: the abandon of a funding leg the provider charged -------------------------------


def _pending_top_up(alice: Api, sandbox: SandboxControl, *, charged: bool) -> FundingLeg:
    """A $3 top-up of a $5 envelope whose answers were all lost: `charged`, the provider made and
    charged its PaymentIntent; else it never saw it."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    if charged:
        sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 3_000_000, "payment_method": "pm_card_visa"},
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    assert sandbox.state()["counts"]["payment_intents"] == (2 if charged else 1)
    return FundingLeg.objects.get(sequence=2)


def test_abandoning_a_funding_leg_the_provider_charged_is_refused(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    funding = _pending_top_up(alice, sandbox, charged=True)
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer, kind="funding_abandon", reason="Never charged?", funding_leg=funding
        )
    assert refused.value.code == "provider_shows_payment_succeeded"
    (charged_intent,) = sdk.v1.payment_intents.search(
        params={"query": f"metadata['vouch_funding']:'{funding.public_id}'"}
    ).data
    assert refused.value.details == {"payment_intents": {charged_intent.id: "succeeded"}}
    funding.refresh_from_db()
    assert funding.status == FundingStatus.PENDING
    assert not Adjustment.objects.exists()
    read = ProviderRead.objects.get()
    assert [i["status"] for i in read.shows["payment_intents"]] == ["succeeded"]
    assert _answers_hold_their_sha256(read)


def test_abandoning_a_funding_leg_the_provider_never_charged_is_applied(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    funding = _pending_top_up(alice, sandbox, charged=False)
    envelope_id = funding.envelope.public_id
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="funding_abandon", reason="Never charged.", funding_leg=funding
        )
        assert adjustment.amount_micro == 0
        applied = adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=0
        )
    funding.refresh_from_db()
    assert funding.status == FundingStatus.ABANDONED
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (5_000_000, 5_000_000)
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.funding_leg_id, entry.funded_delta, entry.refund_leg_id) == (funding.pk, 0, None)
    assert entry.provider_read_id == applied.approval_read_id is not None
    assert applied.approval_read.shows["payment_intents"] == []
    assert ledger_breaches() == []


def test_a_payment_made_after_the_proposal_stops_the_abandon(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    funding = _pending_top_up(alice, sandbox, charged=False)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="funding_abandon", reason="Never charged.", funding_leg=funding
        )
        sdk.v1.payment_intents.create(
            params={
                "amount": 300,
                "currency": "usd",
                "payment_method": "pm_card_visa",
                "confirm": True,
                "allowed_payment_method_types": ["card"],
                "metadata": {"vouch_funding": funding.public_id},
            }
        )
        with pytest.raises(AdjustmentProviderMismatch) as refused:
            adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=0)
    assert refused.value.code == "provider_shows_payment_succeeded"
    funding.refresh_from_db()
    assert funding.status == FundingStatus.PENDING


# --- funding_accept: a PaymentIntent recorded on another leg ---------------------------------


def test_accepting_a_funding_leg_naming_a_payment_recorded_on_another_leg_is_refused(
    alice: Api, sandbox: SandboxControl, proposer: User
) -> None:
    """The original's PaymentIntent (its metadata since edited in the Dashboard) named for a
    pending top-up of the same amount: accepting it would count one payment twice."""
    envelope_id = alice.create(3_000_000)["envelope_id"]
    original = FundingLeg.objects.get()
    sandbox.tamper(original.payment_intent_id, metadata={})
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 3_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    top_up = FundingLeg.objects.get(sequence=2)
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer,
            kind="funding_accept",
            reason="This is its payment.",
            funding_leg=top_up,
            provider_object_id=original.payment_intent_id,
        )
    assert refused.value.code == "provider_object_already_recorded"
    assert refused.value.message == (
        f"PaymentIntent {original.payment_intent_id} (charge {original.charge_id}) is recorded on "
        f"funding leg {original.public_id} already: one payment is never counted twice."
    )
    top_up.refresh_from_db()
    assert top_up.status == FundingStatus.PENDING
    assert Envelope.objects.get(public_id=envelope_id).total_funded_micro == 3_000_000


def test_accepting_a_charged_funding_leg_names_its_payment_and_counts_it_once(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    funding = _pending_top_up(alice, sandbox, charged=True)
    intent = sdk.v1.payment_intents.search(
        params={"query": f"metadata['vouch_funding']:'{funding.public_id}'"}
    ).data[0]
    with later():
        adjustment = adjustment_propose(
            actor=proposer,
            kind="funding_accept",
            reason="Charged: its PaymentIntent is there.",
            funding_leg=funding,
            provider_object_id=intent.id,
        )
        assert adjustment.amount_micro == 3_000_000
        applied = adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=3_000_000
        )
    funding.refresh_from_db()
    assert (funding.status, funding.payment_intent_id, funding.charge_id) == (
        FundingStatus.SUCCEEDED,
        intent.id,
        intent.latest_charge,
    )
    assert funding.funded_at is not None
    # The charge is proven by a readback, as every funding charge is.
    run = VerificationRun.objects.get(
        contract_id="stripe.charge.succeeded", operation_id=funding.idempotency_key
    )
    assert run.input == {"charge": intent.latest_charge, "amount": 300}
    envelope = funding.envelope
    envelope.refresh_from_db()
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (8_000_000, 8_000_000)
    entry = JournalEntry.objects.get(kind="adjust")
    assert (entry.funding_leg_id, entry.funded_delta, entry.unspent_delta) == (
        funding.pk,
        3_000_000,
        3_000_000,
    )
    assert entry.provider_read_id == applied.approval_read_id is not None
    assert applied.approval_read is not None
    assert applied.approval_read.shows == {
        "payment_intent": {"id": intent.id, "status": "succeeded", "amount": 300}
    }
    assert ledger_breaches() == []


def _answers_hold_their_sha256(read: ProviderRead) -> bool:
    answers = list(read.answers.all())
    digests = [_sha(bytes(a.body)) for a in answers]
    return (
        bool(answers)
        and all(a.sha256 == d for a, d in zip(answers, digests, strict=True))
        and read.sha256 == _sha("\n".join(digests).encode())
    )


def test_the_adjustment_page_shows_what_the_provider_showed_with_its_sha256(
    alice: Api, sandbox: SandboxControl, proposer: User, approver: User
) -> None:
    from django.test import Client
    from django.urls import reverse

    _, leg = _never_made_refund(alice, sandbox)
    with later():
        adjustment = adjustment_propose(
            actor=proposer, kind="leg_release", reason="Nothing at Stripe.", refund_leg=leg
        )
        applied = adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=2_000_000
        )
    approver.user_permissions.add(
        Permission.objects.get(content_type__app_label="reconciliation", codename="view_adjustment")
    )
    client = Client()
    client.force_login(User.objects.get(pk=approver.pk))
    page = client.get(reverse("admin:reconciliation_adjustment_change", args=[applied.pk]))
    html = page.content.decode()
    assert "The provider, as read" in html
    for read in applied.reads:
        assert read.public_id in html
        for answer in read.answers.all():
            assert answer.sha256 in html
    assert "&quot;refunds&quot;: []" in html  # what the reads showed: no refund of the leg
    # The envelope's journal cites it too.
    approver.user_permissions.add(
        Permission.objects.get(content_type__app_label="envelopes", codename="view_envelope")
    )
    client.force_login(User.objects.get(pk=approver.pk))
    envelope = leg.operation.envelope
    journal = client.get(reverse("admin:envelopes_envelope_change", args=[envelope.pk]))
    approval = applied.approval_read
    assert approval is not None
    page = journal.content.decode()
    shown = re.sub(r"<[^>]+>", "", page)  # as read: each id is a link to its object (issue 27)
    assert (
        f"refund leg {leg.public_id} · adjustment {applied.public_id} · provider read "
        f"{approval.public_id} (sha256 {approval.sha256[:12]}…)"
    ) in shown
    assert f">{applied.public_id}</a>" in page
