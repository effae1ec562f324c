"""Refund allocation and release, rule by rule (SPEC §2, §3): last in, first out across the
succeeded funding legs (the newest top-up first, the original last), each leg's share rounded
down to a whole cent, a leg that rounds to zero dropped, what no leg takes left in the envelope;
and the one release service giving a leg's money back to unspent exactly once, from the balance
it sits in (refunded for an accepted leg, reserved for a refused one), never on a guess."""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from accounts.models import User
from envelopes.exceptions import AmountExceedsUnspent, InvalidAmount, NothingToRefund
from envelopes.models import (
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from envelopes.selectors import ledger_breaches
from envelopes.services import (
    RefundAllocation,
    allocate_lifo,
    refund_allocate,
    refund_leg_on_verdict,
    refund_leg_release,
)
from envelopes.signals import refund_leg_released
from verification.models import VerificationRun

# --- allocate_lifo: (leg id, capacity) oldest first -> (leg id, share) newest first ------------

ORIGINAL, TOP_UP, NEWEST = 1, 2, 3
LEGS = [(ORIGINAL, 5_000_000), (TOP_UP, 3_000_000), (NEWEST, 2_000_000)]


def test_the_newest_leg_is_refunded_first() -> None:
    assert allocate_lifo(LEGS, 1_000_000) == [(NEWEST, 1_000_000)]


def test_a_refund_that_fills_legs_exactly_takes_each_whole_newest_first() -> None:
    assert allocate_lifo(LEGS, 5_000_000) == [(NEWEST, 2_000_000), (TOP_UP, 3_000_000)]
    assert allocate_lifo(LEGS, 10_000_000) == [
        (NEWEST, 2_000_000),
        (TOP_UP, 3_000_000),
        (ORIGINAL, 5_000_000),
    ]


def test_the_last_leg_reached_gives_only_what_is_left() -> None:
    assert allocate_lifo(LEGS, 6_250_000) == [
        (NEWEST, 2_000_000),
        (TOP_UP, 3_000_000),
        (ORIGINAL, 1_250_000),
    ]


def test_more_than_the_legs_hold_takes_every_leg_whole_and_no_more() -> None:
    assert allocate_lifo(LEGS, 99_000_000) == [
        (NEWEST, 2_000_000),
        (TOP_UP, 3_000_000),
        (ORIGINAL, 5_000_000),
    ]


@pytest.mark.parametrize("requested", [0, 1, 9_999])
def test_less_than_a_cent_allocates_nothing(requested: int) -> None:
    assert allocate_lifo(LEGS, requested) == []


def test_no_legs_allocate_nothing() -> None:
    assert allocate_lifo([], 5_000_000) == []


def test_each_share_is_rounded_down_to_a_whole_cent() -> None:
    # 2,000,000 from the newest; 1,005,000 is left, of which the top-up gives 1,000,000: the
    # 5,000 micro below a cent stays in the envelope.
    assert allocate_lifo(LEGS, 3_005_000) == [(NEWEST, 2_000_000), (TOP_UP, 1_000_000)]
    assert allocate_lifo(LEGS, 10_009_999) == [
        (NEWEST, 2_000_000),
        (TOP_UP, 3_000_000),
        (ORIGINAL, 5_000_000),
    ]
    assert allocate_lifo([(ORIGINAL, 5_000_000)], 19_999) == [(ORIGINAL, 10_000)]


def test_a_leg_whose_capacity_has_a_sub_cent_part_gives_only_whole_cents() -> None:
    assert allocate_lifo([(ORIGINAL, 5_000_000), (TOP_UP, 1_234_567)], 2_000_000) == [
        (TOP_UP, 1_230_000),
        (ORIGINAL, 770_000),
    ]


def test_a_leg_that_rounds_to_zero_is_dropped_and_older_legs_still_give() -> None:
    legs = [(ORIGINAL, 5_000_000), (TOP_UP, 0), (NEWEST, 9_999)]
    assert allocate_lifo(legs, 1_000_000) == [(ORIGINAL, 1_000_000)]


def test_an_allocation_never_exceeds_what_was_asked_nor_any_leg() -> None:
    capacity = dict(LEGS)
    for requested in range(0, 11_000_000, 437_777):
        allocation = allocate_lifo(LEGS, requested)
        total = sum(share for _, share in allocation)
        assert total <= requested
        assert requested - total < 10_000 or total == sum(capacity.values())
        for leg_id, share in allocation:
            assert 0 < share <= capacity[leg_id]
            assert share % 10_000 == 0


# --- refund_allocate: an envelope's figures as read ---------------------------------------------


def _funding(pk: int, amount: int, *, refunded: int = 0, reserved: int = 0) -> FundingLeg:
    return FundingLeg(
        pk=pk,
        public_id=f"fnd_{pk}",
        sequence=pk,
        amount_micro=amount,
        refunded_micro=refunded,
        reserved_micro=reserved,
        status=FundingStatus.SUCCEEDED,
    )


def test_the_whole_unspent_balance_is_refunded_when_no_amount_is_given() -> None:
    envelope = Envelope(unspent_micro=6_005_000)
    legs = [_funding(1, 5_000_000), _funding(2, 3_000_000, refunded=1_000_000, reserved=995_000)]
    allocation = refund_allocate(envelope, None, legs)
    assert allocation.requested == 6_005_000
    assert allocation.legs == [(legs[1], 1_000_000), (legs[0], 5_000_000)]
    assert allocation.total == 6_000_000  # 5,000 micro stays: the remainder
    assert allocation.shape == (6_005_000, [("fnd_2", 1_000_000), ("fnd_1", 5_000_000)])


def test_an_amount_equal_to_the_unspent_balance_is_allowed() -> None:
    envelope = Envelope(unspent_micro=2_000_000)
    allocation = refund_allocate(envelope, 2_000_000, [_funding(1, 2_000_000)])
    assert allocation.shape == (2_000_000, [("fnd_1", 2_000_000)])


def test_an_amount_above_the_unspent_balance_is_refused_with_both_figures() -> None:
    envelope = Envelope(unspent_micro=2_000_000)
    with pytest.raises(AmountExceedsUnspent) as caught:
        refund_allocate(envelope, 2_000_001, [_funding(1, 5_000_000)])
    assert caught.value.details == {"unspent_micro": 2_000_000, "amount_micro": 2_000_001}


@pytest.mark.parametrize(
    ("unspent", "amount"),
    [(0, None), (9_999, None)],
)
def test_nothing_to_refund_when_every_leg_rounds_to_zero(unspent: int, amount: int | None) -> None:
    envelope = Envelope(unspent_micro=unspent)
    with pytest.raises(NothingToRefund) as caught:
        refund_allocate(envelope, amount, [_funding(1, 5_000_000)])
    assert caught.value.details == {"unspent_micro": unspent}


@pytest.mark.parametrize("amount", [1, 100, 9_999])
def test_an_amount_of_less_than_a_cent_is_invalid_whatever_the_balance(amount: int) -> None:
    envelope = Envelope(unspent_micro=5_000_000)
    with pytest.raises(InvalidAmount) as caught:
        refund_allocate(envelope, amount, [_funding(1, 5_000_000)])
    assert caught.value.message == (
        "A refund is at least one cent (10,000 micro-dollars); "
        f"{amount:,} micro-dollars is less. Omit amount_micro to refund everything unspent."
    )


def test_a_cent_is_the_smallest_refund() -> None:
    envelope = Envelope(unspent_micro=5_000_000)
    assert refund_allocate(envelope, 10_000, [_funding(1, 5_000_000)]).total == 10_000


def test_a_refund_allocation_totals_its_legs_shares() -> None:
    legs = [_funding(1, 5_000_000), _funding(2, 5_000_000)]
    allocation = RefundAllocation(3_500_000, [(legs[1], 2_000_000), (legs[0], 1_490_000)])
    assert allocation.total == 3_490_000
    assert RefundAllocation(0, []).total == 0
    assert allocation.shape == (3_500_000, [("fnd_2", 2_000_000), ("fnd_1", 1_490_000)])


# --- with the database: the legs as stored, and the one release service -----------------------


@pytest.fixture
def owner(db: None) -> User:
    return User.objects.create_user("rita", "rita@example.com", "pw-rita-123")


def _stored_leg(
    envelope: Envelope, sequence: int, amount: int, status: str, **used: int
) -> FundingLeg:
    return FundingLeg.objects.create(
        envelope=envelope,
        kind=FundingLeg.Kind.ORIGINAL if sequence == 1 else FundingLeg.Kind.TOP_UP,
        sequence=sequence,
        amount_micro=amount,
        status=status,
        payment_method="pm_card_visa",
        idempotency_key=f"{envelope.public_id}:{sequence}",
        charge_id=f"ch_{envelope.pk}_{sequence}",
        **used,
    )


@pytest.mark.django_db
def test_only_succeeded_legs_are_read_and_newest_by_sequence_comes_first(owner: User) -> None:
    envelope = Envelope.objects.create(
        owner=owner, total_funded_micro=4_000_000, unspent_micro=4_000_000
    )
    # Written out of order: the sequence, not the row's age, says which is newest.
    third = _stored_leg(envelope, 3, 3_000_000, FundingStatus.SUCCEEDED)
    _stored_leg(envelope, 4, 7_000_000, FundingStatus.PENDING)  # not funded money yet
    _stored_leg(envelope, 2, 7_000_000, FundingStatus.ABANDONED)  # never charged
    first = _stored_leg(envelope, 1, 1_000_000, FundingStatus.SUCCEEDED)
    allocation = refund_allocate(envelope, None)
    assert allocation.shape == (
        4_000_000,
        [(third.public_id, 3_000_000), (first.public_id, 1_000_000)],
    )


@pytest.fixture
def released() -> Iterator[list[dict[str, Any]]]:
    """Every announcement of a release: what each listener is told."""
    seen: list[dict[str, Any]] = []

    def listener(sender: Any, **kwargs: Any) -> None:
        seen.append({"sender": sender, **kwargs})

    refund_leg_released.connect(listener, dispatch_uid="tests.allocation_rules", weak=False)
    yield seen
    refund_leg_released.disconnect(dispatch_uid="tests.allocation_rules")


def _leg_in(owner: User, outcome: str, amount: int = 2_000_000) -> RefundLeg:
    """A 5,000,000 envelope with one refund leg of `amount` in `outcome`, its balances as that
    outcome leaves them: accepted in refunded, any other in reserved."""
    accepted = outcome == LegOutcome.ACCEPTED
    envelope = Envelope.objects.create(
        owner=owner,
        total_funded_micro=5_000_000,
        total_refunded_micro=amount if accepted else 0,
        reserved_micro=0 if accepted else amount,
        unspent_micro=5_000_000 - amount,
    )
    funding = _stored_leg(
        envelope,
        1,
        5_000_000,
        FundingStatus.SUCCEEDED,
        refunded_micro=amount if accepted else 0,
        reserved_micro=0 if accepted else amount,
    )
    operation = RefundOperation.objects.create(
        envelope=envelope, requested_micro=amount, remainder_micro=0, created_by=owner
    )
    leg = RefundLeg.objects.create(
        operation=operation,
        funding_leg=funding,
        sequence=1,
        amount_micro=amount,
        outcome=outcome,
        idempotency_key=f"{operation.public_id}:1",
        reserved_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    # The journal that led there, so the ledger check can recompute every balance.
    kind = JournalEntry.Kind
    journal = JournalEntry.objects
    journal.create(
        envelope=envelope,
        kind=kind.FUND,
        funded_delta=5_000_000,
        unspent_delta=5_000_000,
        funding_leg=funding,
    )
    journal.create(
        envelope=envelope,
        kind=kind.RESERVE,
        reserved_delta=amount,
        unspent_delta=-amount,
        refund_leg=leg,
    )
    if accepted:
        journal.create(
            envelope=envelope,
            kind=kind.ACCEPT,
            reserved_delta=-amount,
            refunded_delta=amount,
            refund_leg=leg,
        )
    return leg


def _balances(leg: RefundLeg) -> tuple[int, int, int, int, int, int]:
    """(envelope refunded, reserved, unspent, funded; funding leg refunded, reserved)."""
    envelope = Envelope.objects.get(pk=leg.operation.envelope_id)
    funding = FundingLeg.objects.get(pk=leg.funding_leg_id)
    return (
        envelope.total_refunded_micro,
        envelope.reserved_micro,
        envelope.unspent_micro,
        envelope.total_funded_micro,
        funding.refunded_micro,
        funding.reserved_micro,
    )


@pytest.mark.django_db
def test_releasing_an_accepted_leg_moves_its_money_from_refunded_to_unspent(
    owner: User, released: list[dict[str, Any]]
) -> None:
    leg = _leg_in(owner, LegOutcome.ACCEPTED, 2_000_000)
    refund = {"id": "re_1", "status": "failed"}
    assert _balances(leg) == (2_000_000, 0, 3_000_000, 5_000_000, 2_000_000, 0)
    assert refund_leg_release(leg=leg, reason="failed: lost_or_stolen_card", provider_refund=refund)
    assert _balances(leg) == (0, 0, 5_000_000, 5_000_000, 0, 0)
    entry = JournalEntry.objects.get(kind=JournalEntry.Kind.RELEASE)
    assert (
        entry.refund_leg_id,
        entry.refunded_delta,
        entry.reserved_delta,
        entry.unspent_delta,
        entry.funded_delta,
        entry.debited_delta,
        entry.note,
    ) == (leg.pk, -2_000_000, 0, 2_000_000, 0, 0, "failed: lost_or_stolen_card")
    assert RefundLeg.objects.get(pk=leg.pk).released is True
    assert [(r["sender"], r["leg"].pk, r["reason"], r["provider_refund"]) for r in released] == [
        (RefundLeg, leg.pk, "failed: lost_or_stolen_card", refund)
    ]
    assert released[0]["leg"].released is True
    assert ledger_breaches() == []


@pytest.mark.django_db
def test_releasing_a_refused_leg_moves_its_money_from_reserved_to_unspent(
    owner: User, released: list[dict[str, Any]]
) -> None:
    leg = _leg_in(owner, LegOutcome.REFUSED, 1_250_000)
    assert _balances(leg) == (0, 1_250_000, 3_750_000, 5_000_000, 0, 1_250_000)
    assert refund_leg_release(leg=leg, reason="refused: charge_disputed") is True
    assert _balances(leg) == (0, 0, 5_000_000, 5_000_000, 0, 0)
    entry = JournalEntry.objects.get(kind=JournalEntry.Kind.RELEASE)
    assert (entry.refunded_delta, entry.reserved_delta, entry.unspent_delta) == (
        0,
        -1_250_000,
        1_250_000,
    )
    assert [(r["reason"], r["provider_refund"]) for r in released] == [
        ("refused: charge_disputed", None)
    ]
    assert ledger_breaches() == []


@pytest.mark.django_db
@pytest.mark.parametrize("outcome", [LegOutcome.ACCEPTED, LegOutcome.REFUSED])
def test_a_leg_is_released_once_the_second_call_changes_nothing(
    owner: User, released: list[dict[str, Any]], outcome: str
) -> None:
    leg = _leg_in(owner, outcome)
    assert refund_leg_release(leg=leg, reason="first") is True
    after = _balances(leg)
    stale = RefundLeg.objects.get(pk=leg.pk)
    assert refund_leg_release(leg=leg, reason="second") is False  # the caller's copy is stale
    assert refund_leg_release(leg=stale, reason="third") is False
    assert _balances(leg) == after
    assert JournalEntry.objects.filter(kind=JournalEntry.Kind.RELEASE).count() == 1
    assert [r["reason"] for r in released] == ["first"]


@pytest.mark.django_db
@pytest.mark.parametrize("outcome", [LegOutcome.RESERVED, LegOutcome.UNKNOWN, LegOutcome.VOID])
def test_a_leg_without_a_definite_failure_is_never_released_on_a_guess(
    owner: User, released: list[dict[str, Any]], outcome: str
) -> None:
    leg = _leg_in(owner, outcome)
    before = _balances(leg)
    assert refund_leg_release(leg=leg, reason="timeout") is False
    assert _balances(leg) == before
    assert RefundLeg.objects.get(pk=leg.pk).released is False
    assert not JournalEntry.objects.filter(kind=JournalEntry.Kind.RELEASE).exists()
    assert released == []


@pytest.mark.django_db
def test_a_long_reason_is_cut_to_the_journal_notes_200_characters(
    owner: User, released: list[dict[str, Any]]
) -> None:
    leg = _leg_in(owner, LegOutcome.REFUSED)
    reason = "refused: " + "x" * 300
    assert refund_leg_release(leg=leg, reason=reason) is True
    assert JournalEntry.objects.get(kind=JournalEntry.Kind.RELEASE).note == reason[:200]
    assert released[0]["reason"] == reason  # the listeners are told the whole reason


# --- a verdict on a refund leg: which ones give the money back ---------------------------------


def _verdict_on(leg: RefundLeg, verdict: str, verdict_class: str = "") -> VerificationRun:
    run = VerificationRun.objects.create(
        contract_id="stripe.refund.created",
        contract_version=1,
        operation_id=leg.idempotency_key,
        operation_created_at=leg.reserved_at,
        deadline_at=leg.reserved_at,
        verdict=verdict,
        verdict_class=verdict_class,
        verdict_reason="the provider shows the refund failed",
    )
    RefundLeg.objects.filter(pk=leg.pk).update(verification_run=run)
    return run


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("verdict", "verdict_class"),
    [("FAILED", ""), ("FAILED", "amount"), ("CONTRADICTED", "reversed")],
)
def test_a_failed_or_reversed_verdict_gives_an_accepted_legs_money_back(
    owner: User, released: list[dict[str, Any]], verdict: str, verdict_class: str
) -> None:
    leg = _leg_in(owner, LegOutcome.ACCEPTED, 2_000_000)
    refund_leg_on_verdict(run=_verdict_on(leg, verdict, verdict_class))
    assert _balances(leg) == (0, 0, 5_000_000, 5_000_000, 0, 0)
    assert [r["reason"] for r in released] == [
        f"verification {verdict}: the provider shows the refund failed"
    ]
    assert ledger_breaches() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("verdict", "verdict_class"),
    [
        ("VERIFIED", ""),
        ("PENDING", ""),
        ("UNVERIFIABLE", "not at the provider"),
        ("CONTRADICTED", "duplicate side effect"),  # a person resolves it: no money moves
        ("CONTRADICTED", "amount"),
        ("VERIFIED", "reversed"),
    ],
)
def test_any_other_verdict_moves_no_money(
    owner: User, released: list[dict[str, Any]], verdict: str, verdict_class: str
) -> None:
    leg = _leg_in(owner, LegOutcome.ACCEPTED, 2_000_000)
    before = _balances(leg)
    refund_leg_on_verdict(run=_verdict_on(leg, verdict, verdict_class))
    assert _balances(leg) == before
    assert released == []


@pytest.mark.django_db
def test_a_failed_verdict_on_a_run_of_no_refund_leg_moves_no_money(
    owner: User, released: list[dict[str, Any]]
) -> None:
    leg = _leg_in(owner, LegOutcome.ACCEPTED, 2_000_000)
    run = _verdict_on(leg, "FAILED")
    RefundLeg.objects.filter(pk=leg.pk).update(verification_run=None)  # e.g. a funding charge's
    refund_leg_on_verdict(run=run)
    assert _balances(leg) == (2_000_000, 0, 3_000_000, 5_000_000, 2_000_000, 0)
    assert released == []
