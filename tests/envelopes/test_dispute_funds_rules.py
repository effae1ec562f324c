"""The money a dispute takes (SPEC §18, issue 37), rule by rule: what a dispute's balance
transactions show (`dispute_moved`, over every shape), and what `dispute_funds_follow` writes of
it — the hold bounded by what the charge still has unspent, the exposure escalated, a charge back,
a reinstatement (in full, in part, after a loss on appeal), once however many observers call it,
nothing for an inquiry or a charge that is not Vouch's — what it stores, cites and audits.
(These kill the mutants of `envelopes.services.dispute_funds`; the stories through the sandbox's
events are tests/envelopes/test_dispute_funds.py.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from accounts.models import User
from core.models import AuditEvent
from envelopes import services
from envelopes.models import (
    DisputeFunds,
    DisputeFundsStatus,
    Envelope,
    FundingLeg,
    JournalEntry,
    ProviderRead,
)
from envelopes.selectors import ledger_breaches
from envelopes.services.dispute_funds import (
    DisputeUnreadable,
    Moved,
    _charge_of,
    dispute_funds_follow,
    dispute_funds_read_and_follow,
    dispute_moved,
)
from stripe_sandbox.client import SandboxControl
from verification.models import Escalation

pytestmark = pytest.mark.django_db

DOLLAR = 1_000_000
CENT = 10_000


def withdrawal(cents: int, fee: int = 1500) -> dict[str, Any]:
    return {"object": "balance_transaction", "amount": -cents, "fee": fee,
            "reporting_category": "dispute"}  # fmt: skip


def reversal(cents: int) -> dict[str, Any]:
    return {"object": "balance_transaction", "amount": cents, "fee": 0,
            "reporting_category": "dispute_reversal"}  # fmt: skip


def dispute(
    charge: Any, *txns: Any, status: str = "needs_response", amount: int = 3000, id: str = "du_1"
) -> dict[str, Any]:
    return {
        "id": id,
        "object": "dispute",
        "charge": charge,
        "amount": amount,
        "status": status,
        "balance_transactions": list(txns),
    }


@pytest.fixture
def buyer(db: None) -> User:
    return User.objects.create_user("rita", "rita@example.com", "pw-rita-123")


@pytest.fixture
def staff(db: None) -> User:
    return User.objects.create_user("otto", "otto@example.com", "pw-otto-123", is_staff=True)


def fund(buyer: User, dollars: int) -> tuple[Envelope, FundingLeg]:
    envelope = services.envelope_create(
        owner=buyer, amount_micro=dollars * DOLLAR, payment_method="pm_card_visa"
    ).envelope
    return envelope, FundingLeg.objects.get(envelope=envelope)


def figures(envelope: Envelope) -> dict[str, int]:
    envelope.refresh_from_db()
    return {
        "debited": envelope.total_debited_micro,
        "refunded": envelope.total_refunded_micro,
        "unspent": envelope.unspent_micro,
        "held": envelope.held_micro,
        "charged_back": envelope.charged_back_micro,
    }


def funds_of(dispute_id: str = "du_1") -> tuple[int, int, int, int, int, str]:
    f = DisputeFunds.objects.get(provider_dispute_id=dispute_id)
    return (
        f.withdrawn_micro,
        f.reinstated_micro,
        f.held_micro,
        f.charged_back_micro,
        f.exposure_micro,
        f.status,
    )


def kinds(dispute_id: str = "du_1") -> list[str]:
    return list(
        JournalEntry.objects.filter(dispute_funds__provider_dispute_id=dispute_id)
        .order_by("id")
        .values_list("kind", flat=True)
    )


# --- what the balance transactions show -----------------------------------------------------------


def test_nothing_moved_when_there_are_no_balance_transactions() -> None:
    for shown in ({}, {"balance_transactions": None}, {"balance_transactions": []}):
        assert dispute_moved(shown) == Moved(0, 0, 0)


def test_a_withdrawal_and_its_reversal_are_read_with_their_fees() -> None:
    shown = {"balance_transactions": [withdrawal(3000), reversal(3000)]}
    assert dispute_moved(shown) == Moved(withdrawn=3000, reinstated=3000, fees=1500)
    assert dispute_moved({"balance_transactions": [withdrawal(2500, fee=0)]}) == Moved(2500, 0, 0)
    assert dispute_moved({"balance_transactions": [reversal(700)]}) == Moved(0, 700, 0)


def test_entries_that_are_not_objects_or_not_a_dispute_s_money_are_skipped() -> None:
    other = {"amount": -500, "fee": 100, "reporting_category": "refund"}
    shown = {"balance_transactions": ["txn_unexpanded", other, withdrawal(1000), other,
                                      reversal(400), "txn_2"]}  # fmt: skip
    assert dispute_moved(shown) == Moved(withdrawn=1000, reinstated=400, fees=1500)


def test_missing_amounts_and_fees_count_as_zero() -> None:
    blank = {"amount": None, "fee": None, "reporting_category": "dispute"}
    assert dispute_moved({"balance_transactions": [blank, withdrawal(1000)]}) == Moved(
        1000, 0, 1500
    )
    assert dispute_moved({"balance_transactions": [blank]}) == Moved(0, 0, 0)


def test_amounts_that_net_below_zero_read_as_nothing() -> None:
    backwards = {"amount": 300, "fee": -20, "reporting_category": "dispute"}
    negative = {"amount": -200, "fee": 0, "reporting_category": "dispute_reversal"}
    assert dispute_moved({"balance_transactions": [backwards, negative]}) == Moved(0, 0, 0)


def test_the_charge_of_a_dispute_as_id_or_expanded() -> None:
    assert _charge_of({"charge": "ch_1"}) == "ch_1"
    assert _charge_of({"charge": {"id": "ch_2", "object": "charge"}}) == "ch_2"
    assert _charge_of({"charge": None}) == ""
    assert _charge_of({}) == ""


# --- the hold -------------------------------------------------------------------------------------


def test_a_withdrawal_holds_the_charge_s_unspent_money_and_cites_the_read(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    source = "charge.dispute.funds_withdrawn evt_1"
    funds = dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source=source)
    assert funds is not None
    assert funds.provider_dispute_id == "du_1"
    assert figures(envelope) == {
        "debited": 0,
        "refunded": 0,
        "unspent": 0,
        "held": 30 * DOLLAR,
        "charged_back": 0,
    }
    assert funds_of() == (30 * DOLLAR, 0, 30 * DOLLAR, 0, 0, DisputeFundsStatus.HELD)
    funds.refresh_from_db()
    assert (funds.disputed_micro, funds.fees_micro, funds.provider_status) == (
        30 * DOLLAR,
        15 * DOLLAR,
        "needs_response",
    )
    assert (funds.charge_id, funds.envelope_id, funds.funding_leg_id) == (
        leg.charge_id,
        envelope.pk,
        leg.pk,
    )
    assert funds.escalation_id is None  # nothing beyond what the charge had: no exposure
    leg.refresh_from_db()
    assert (leg.held_micro, leg.charged_back_micro, leg.capacity_micro) == (30 * DOLLAR, 0, 0)

    entry = JournalEntry.objects.get(dispute_funds=funds)
    assert (entry.kind, entry.unspent_delta, entry.held_delta, entry.charged_back_delta) == (
        "hold",
        -30 * DOLLAR,
        30 * DOLLAR,
        0,
    )
    assert entry.funding_leg_id == leg.pk
    assert entry.note == f"dispute du_1: funds withdrawn ({source})"
    read = ProviderRead.objects.get(pk=entry.provider_read_id)
    assert funds.last_read_id == read.pk
    assert (read.purpose, read.kind, read.subject, read.envelope_id) == (
        "dispute.funds",
        "dispute",
        "du_1",
        envelope.pk,
    )
    assert read.shows == {
        "dispute": "du_1",
        "charge": leg.charge_id,
        "status": "needs_response",
        "withdrawn": 3000,
        "reinstated": 0,
        "fees": 1500,
    }
    answer = read.answers.get()
    assert answer.request == {"path": "/v1/disputes/du_1", "source": source}
    assert answer.sha256_matches()

    audit = AuditEvent.objects.get(action="dispute.funds")
    assert (audit.target_type, audit.target_id) == ("envelope", envelope.public_id)
    assert audit.details == {
        "dispute": "du_1",
        "charge": leg.charge_id,
        "status": DisputeFundsStatus.HELD,
        "held_micro": 30 * DOLLAR,
        "charged_back_micro": 0,
        "exposure_micro": 0,
        "provider_read": read.public_id,
        "source": source,
    }
    assert ledger_breaches() == []


def test_a_dispute_on_an_expanded_charge_is_followed(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 20)
    expanded = {"id": leg.charge_id, "object": "charge"}
    assert dispute_funds_follow(dispute=dispute(expanded, withdrawal(2000)), source="t")
    assert figures(envelope)["held"] == 20 * DOLLAR


def test_the_dispute_s_amount_is_recorded_as_stripe_shows_it(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    _, leg = fund(buyer, 30)
    shown = dispute(leg.charge_id, withdrawal(1000), amount=1000)
    assert dispute_funds_follow(dispute=shown, source="t")
    assert DisputeFunds.objects.get().disputed_micro == 10 * DOLLAR
    # A read without an amount or a status: nothing invented.
    _, other = fund(buyer, 30)
    bare = dispute(other.charge_id, withdrawal(1000), id="du_2")
    del bare["amount"], bare["status"]
    assert dispute_funds_follow(dispute=bare, source="t")
    funds = DisputeFunds.objects.get(provider_dispute_id="du_2")
    assert (funds.disputed_micro, funds.provider_status, funds.held_micro) == (0, "", 10 * DOLLAR)


def test_a_status_longer_than_its_column_is_cut(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    _, leg = fund(buyer, 30)
    long = "x" * 60
    assert dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(100), status=long),
                                source="t")  # fmt: skip
    assert DisputeFunds.objects.get().provider_status == "x" * 40


def test_notes_are_cut_at_two_hundred_characters(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    _, leg = fund(buyer, 30)
    source = "s" * 300
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source=source)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000), status="lost"),
                         source=source)  # fmt: skip
    dispute_funds_follow(
        dispute=dispute(leg.charge_id, withdrawal(3000), reversal(3000), status="won"),
        source=source,
    )
    notes = list(
        JournalEntry.objects.filter(dispute_funds__isnull=False).values_list("note", flat=True)
    )
    assert [len(n) for n in notes] == [200, 200, 200]


def test_a_partial_dispute_holds_only_the_disputed_amount(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(1200), amount=1200), source="t")
    assert figures(envelope)["held"] == 12 * DOLLAR
    assert figures(envelope)["unspent"] == 18 * DOLLAR
    leg.refresh_from_db()
    assert leg.capacity_micro == 18 * DOLLAR


def test_the_hold_is_bounded_by_the_envelope_s_unspent_money_the_rest_is_exposure(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=20 * DOLLAR, reference="job", actor=staff)
    funds = dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    assert funds is not None
    assert funds_of() == (30 * DOLLAR, 0, 10 * DOLLAR, 0, 20 * DOLLAR, DisputeFundsStatus.HELD)
    assert figures(envelope)["held"] == 10 * DOLLAR
    escalation = Escalation.objects.get(pk=funds.escalation_id)
    # No adjustment can correct it (the ledger is right: the charge had no more), so a person
    # resolves it with a note once the platform settles it (SPEC §18: escalated to a person).
    assert (escalation.verdict, escalation.verdict_class, escalation.money) == (
        "EXPOSURE",
        "dispute exposure",
        False,
    )
    assert (escalation.subject_type, escalation.subject_id) == ("funding_leg", leg.public_id)
    assert "$30.00" in escalation.reason
    assert "$20.00" in escalation.reason
    assert audit_details()["exposure_micro"] == 20 * DOLLAR
    # Seen again: the same escalation, not another one.
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    assert Escalation.objects.count() == 1


def audit_details() -> dict[str, Any]:
    return AuditEvent.objects.filter(action="dispute.funds").latest("id").details


def test_nothing_left_unspent_holds_nothing_it_is_all_exposure(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=30 * DOLLAR, reference="job", actor=staff)
    funds = dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    assert funds is not None
    assert funds_of() == (30 * DOLLAR, 0, 0, 0, 30 * DOLLAR, DisputeFundsStatus.HELD)
    assert figures(envelope)["held"] == 0
    assert funds.escalation_id is not None


def test_the_hold_is_bounded_by_what_the_charge_itself_has_left(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    """Another charge's unspent money is never taken for this charge's dispute."""
    envelope, leg = fund(buyer, 30)
    services.envelope_refund(envelope=envelope, actor=buyer, amount_micro=25 * DOLLAR)
    services.envelope_top_up(envelope=envelope, amount_micro=40 * DOLLAR,
                             payment_method="pm_card_visa")  # fmt: skip
    assert figures(envelope)["unspent"] == 45 * DOLLAR
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    assert funds_of() == (30 * DOLLAR, 0, 5 * DOLLAR, 0, 25 * DOLLAR, DisputeFundsStatus.HELD)
    assert figures(envelope)["unspent"] == 40 * DOLLAR
    assert ledger_breaches() == []


# --- lost, won, appealed --------------------------------------------------------------------------


def test_a_lost_dispute_charges_the_held_money_back_once(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    for _ in range(2):  # two observers of the loss
        funds = dispute_funds_follow(
            dispute=dispute(leg.charge_id, withdrawal(3000), status="lost"), source="t"
        )
        assert funds is not None
        assert funds.status == DisputeFundsStatus.CHARGED_BACK
    assert funds_of() == (30 * DOLLAR, 0, 0, 30 * DOLLAR, 0, DisputeFundsStatus.CHARGED_BACK)
    assert figures(envelope) == {
        "debited": 0,
        "refunded": 0,
        "unspent": 0,
        "held": 0,
        "charged_back": 30 * DOLLAR,
    }
    leg.refresh_from_db()
    assert (leg.held_micro, leg.charged_back_micro) == (0, 30 * DOLLAR)
    entry = JournalEntry.objects.get(dispute_funds__provider_dispute_id="du_1", kind="chargeback")
    assert (entry.held_delta, entry.charged_back_delta, entry.unspent_delta) == (
        -30 * DOLLAR,
        30 * DOLLAR,
        0,
    )
    assert entry.note == "dispute du_1: lost (t)"
    assert entry.provider_read_id is not None
    assert audit_details()["charged_back_micro"] == 30 * DOLLAR
    assert kinds() == ["hold", "chargeback"]
    assert ledger_breaches() == []


def test_a_dispute_seen_first_when_lost_is_held_and_charged_back_at_once(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000), status="lost"),
                         source="t")  # fmt: skip
    assert kinds() == ["hold", "chargeback"]
    assert figures(envelope)["charged_back"] == 30 * DOLLAR
    # One read cited by both entries.
    assert (
        JournalEntry.objects.filter(dispute_funds__isnull=False)
        .values("provider_read_id")
        .distinct()
        .count()
        == 1
    )


def test_an_open_dispute_is_not_charged_back(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    for status in ("needs_response", "under_review", "warning_closed"):
        dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000), status=status),
                             source="t")  # fmt: skip
    assert kinds() == ["hold"]
    assert funds_of()[5] == DisputeFundsStatus.HELD
    assert figures(envelope)["held"] == 30 * DOLLAR


def test_a_won_dispute_gives_the_held_money_back_once(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    won = dispute(leg.charge_id, withdrawal(3000), reversal(3000), status="won")
    for _ in range(2):
        dispute_funds_follow(dispute=won, source="t")
    assert funds_of() == (30 * DOLLAR, 30 * DOLLAR, 0, 0, 0, DisputeFundsStatus.REINSTATED)
    assert figures(envelope)["unspent"] == 30 * DOLLAR
    assert figures(envelope)["held"] == 0
    leg.refresh_from_db()
    assert (leg.held_micro, leg.capacity_micro) == (0, 30 * DOLLAR)
    entry = JournalEntry.objects.get(dispute_funds__provider_dispute_id="du_1", kind="reinstate")
    assert (entry.held_delta, entry.charged_back_delta, entry.unspent_delta) == (
        -30 * DOLLAR,
        0,
        30 * DOLLAR,
    )
    assert entry.note == "dispute du_1: funds reinstated (t)"
    assert kinds() == ["hold", "reinstate"]
    # A stale "lost" read after the win changes nothing.
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000), reversal(3000),
                                         status="lost"), source="t")  # fmt: skip
    assert kinds() == ["hold", "reinstate"]
    assert ledger_breaches() == []


def test_a_won_dispute_with_exposure_gives_back_what_was_held_and_clears_the_exposure(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=20 * DOLLAR, reference="job", actor=staff)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    won = dispute(leg.charge_id, withdrawal(3000), reversal(3000), status="won")
    dispute_funds_follow(dispute=won, source="t")
    assert funds_of() == (30 * DOLLAR, 30 * DOLLAR, 0, 0, 0, DisputeFundsStatus.REINSTATED)
    assert figures(envelope)["unspent"] == 10 * DOLLAR
    assert ledger_breaches() == []
    # Nothing is exposed any more: the person's case closes itself, citing Stripe's read.
    escalation = Escalation.objects.get()
    assert (escalation.status, escalation.resolution) == ("resolved", "cleared")
    assert "reinstated" in escalation.resolution_note


def test_a_partial_reinstatement_gives_back_what_it_shows_and_no_more(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=20 * DOLLAR, reference="job", actor=staff)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    # $10 held, $20 exposure; Stripe gives back $15: the $10 held, and $5 of the exposure.
    part = dispute(leg.charge_id, withdrawal(3000), reversal(1500), status="won")
    dispute_funds_follow(dispute=part, source="t")
    assert funds_of() == (
        30 * DOLLAR,
        15 * DOLLAR,
        0,
        0,
        15 * DOLLAR,
        DisputeFundsStatus.REINSTATED,
    )
    assert figures(envelope)["unspent"] == 10 * DOLLAR


def test_a_reinstatement_smaller_than_the_hold_leaves_the_rest_held(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    part = dispute(leg.charge_id, withdrawal(3000), reversal(1000), status="won")
    dispute_funds_follow(dispute=part, source="t")
    assert funds_of() == (
        30 * DOLLAR,
        10 * DOLLAR,
        20 * DOLLAR,
        0,
        0,
        DisputeFundsStatus.REINSTATED,
    )
    assert figures(envelope)["unspent"] == 10 * DOLLAR
    assert figures(envelope)["held"] == 20 * DOLLAR
    assert ledger_breaches() == []


def test_won_on_appeal_after_a_loss_gives_the_charged_back_money_back(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=20 * DOLLAR, reference="job", actor=staff)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000), status="lost"),
                         source="t")  # fmt: skip
    assert funds_of() == (30 * DOLLAR, 0, 0, 10 * DOLLAR, 20 * DOLLAR,
                          DisputeFundsStatus.CHARGED_BACK)  # fmt: skip
    won = dispute(leg.charge_id, withdrawal(3000), reversal(3000), status="won")
    dispute_funds_follow(dispute=won, source="t")
    assert funds_of() == (30 * DOLLAR, 30 * DOLLAR, 0, 0, 0, DisputeFundsStatus.REINSTATED)
    assert figures(envelope) == {
        "debited": 20 * DOLLAR,
        "refunded": 0,
        "unspent": 10 * DOLLAR,
        "held": 0,
        "charged_back": 0,
    }
    leg.refresh_from_db()
    assert (leg.held_micro, leg.charged_back_micro) == (0, 0)
    entry = JournalEntry.objects.get(dispute_funds__provider_dispute_id="du_1", kind="reinstate")
    assert (entry.held_delta, entry.charged_back_delta, entry.unspent_delta) == (
        0,
        -10 * DOLLAR,
        10 * DOLLAR,
    )
    assert kinds() == ["hold", "chargeback", "reinstate"]
    assert ledger_breaches() == []


def test_a_partial_reinstatement_after_a_loss_leaves_the_exposure(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=20 * DOLLAR, reference="job", actor=staff)
    dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000), status="lost"),
                         source="t")  # fmt: skip
    part = dispute(leg.charge_id, withdrawal(3000), reversal(500), status="won")
    dispute_funds_follow(dispute=part, source="t")
    assert funds_of() == (30 * DOLLAR, 5 * DOLLAR, 0, 5 * DOLLAR, 20 * DOLLAR,
                          DisputeFundsStatus.REINSTATED)  # fmt: skip
    assert figures(envelope)["unspent"] == 5 * DOLLAR
    assert ledger_breaches() == []


# --- nothing to follow ----------------------------------------------------------------------------


def test_an_inquiry_holds_nothing_and_writes_nothing(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    inquiry = dispute(leg.charge_id, status="warning_needs_response")
    assert dispute_funds_follow(dispute=inquiry, source="t") is None
    assert not DisputeFunds.objects.exists()
    assert not JournalEntry.objects.filter(kind="hold").exists()
    assert not AuditEvent.objects.filter(action="dispute.funds").exists()
    assert figures(envelope)["unspent"] == 30 * DOLLAR


def test_a_dispute_without_an_id_or_a_charge_or_on_a_charge_not_vouch_s_moves_nothing(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    no_id = dispute(leg.charge_id, withdrawal(3000))
    del no_id["id"]
    no_charge = dispute(None, withdrawal(3000))
    foreign = dispute("ch_not_vouchs", withdrawal(3000))
    for shown in (no_id, no_charge, foreign):
        assert dispute_funds_follow(dispute=shown, source="t") is None
    assert not DisputeFunds.objects.exists()
    assert figures(envelope)["unspent"] == 30 * DOLLAR


def test_a_later_read_is_followed_once_a_row_exists(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    """Once held, the dispute's later reads are followed (their status, and the return value),
    whatever they show."""
    _, leg = fund(buyer, 30)
    first = dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    again = dispute_funds_follow(
        dispute=dispute(leg.charge_id, withdrawal(3000), status="under_review"), source="t"
    )
    assert again is not None
    assert first is not None
    assert again.pk == first.pk
    assert again.provider_status == "under_review"
    assert AuditEvent.objects.filter(action="dispute.funds").count() == 1  # nothing moved again


# --- observers at once, and the provider's read ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_observers_hold_once(buyer: User, stripe_at_sandbox: SandboxControl) -> None:
    envelope, leg = fund(buyer, 30)
    shown = dispute(leg.charge_id, withdrawal(3000))
    start = threading.Barrier(4)
    answers: list[Any] = []

    def observe() -> None:
        try:
            start.wait()
            answers.append(dispute_funds_follow(dispute=shown, source="t"))
        finally:
            connection.close()

    threads = [threading.Thread(target=observe) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 4
    assert all(a is not None and a.provider_dispute_id == "du_1" for a in answers)
    assert kinds() == ["hold"]
    assert figures(envelope)["held"] == 30 * DOLLAR
    assert ledger_breaches() == []


def test_read_and_follow_reads_the_dispute_from_stripe(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    envelope, leg = fund(buyer, 30)
    opened = stripe_at_sandbox.open_dispute(leg.charge_id, reason="fraudulent")
    funds = dispute_funds_read_and_follow(dispute_id=opened["id"], source="manage.py")
    assert funds is not None
    assert funds.provider_dispute_id == opened["id"]
    assert figures(envelope)["held"] == 30 * DOLLAR


def test_read_and_follow_says_why_stripe_did_not_show_the_dispute(
    stripe_at_sandbox: SandboxControl,
) -> None:
    with pytest.raises(DisputeUnreadable) as refused:
        dispute_funds_read_and_follow(dispute_id="du_missing", source="manage.py")
    message = str(refused.value)
    assert "du_missing" in message
    assert "resource_missing" in message
    assert "No such dispute" in message
    assert "no message" not in message


def test_an_exposure_of_one_micro_dollar_is_escalated(
    buyer: User, staff: User, stripe_at_sandbox: SandboxControl
) -> None:
    """Debits may leave sub-cent balances: a withdrawal one micro-dollar more than the charge had
    unspent is exposure too, and a person hears of it."""
    envelope, leg = fund(buyer, 30)
    services.debit_add(envelope=envelope, amount_micro=1, reference="job", actor=staff)
    funds = dispute_funds_follow(dispute=dispute(leg.charge_id, withdrawal(3000)), source="t")
    assert funds is not None
    assert (funds.held_micro, funds.exposure_micro) == (30 * DOLLAR - 1, 1)
    assert funds.escalation_id is not None
