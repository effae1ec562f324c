"""Money a dispute takes (SPEC §18): the ledger follows Stripe's balance transactions for a dispute.

When Stripe withdraws a chargeback's funds from the balance (`charge.dispute.funds_withdrawn`, or
any read of the dispute whose `balance_transactions` show the withdrawal), the disputed amount
leaves the envelope's unspent balance into `held_micro` — as much of it as that charge still has
unspent; the rest (money already debited or refunded) is the platform's *exposure*, recorded on
the dispute's funds row and escalated to a person, never taken from another charge's money. A won
dispute (`funds_reinstated`: a `dispute_reversal` balance transaction) gives the held money back
to unspent; a lost one makes it `charged_back_micro`. An inquiry withdraws nothing and holds
nothing.

One service, `dispute_funds_follow`, takes a Dispute object as Stripe showed it (an event's
re-read, reconciliation's listing) and writes what it shows that the ledger does not have yet:
at most one `hold`, one `chargeback` and one `reinstate` entry per dispute (a database
constraint), each under the envelope's lock and citing the provider read stored with it. Every
observer calling it with the same dispute writes each movement once. It never calls the
provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from core.display import dollars
from core.services import audit_record
from envelopes.locks import lock_envelope
from envelopes.models import (
    MICRO_PER_CENT,
    DisputeFunds,
    DisputeFundsStatus,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    ProviderRead,
)
from envelopes.provider_reads import Answer, provider_read_store
from envelopes.services.journal import _funding_hold, _move, _provider
from verification.services import escalation_clear, escalation_open
from verification.subjects import Subject

# Stripe's reporting categories of a dispute's balance transactions
# (https://docs.stripe.com/reports/reporting-categories): the withdrawal, and its reversal when the
# merchant wins.
WITHDRAWAL = "dispute"
REINSTATEMENT = "dispute_reversal"
LOST = "lost"
EXPOSURE = "dispute exposure"


@dataclass(frozen=True)
class Moved:
    """What Stripe's balance transactions for one dispute show, in cents: what was withdrawn and
    reinstated (the disputed money, fees apart) and the fees."""

    withdrawn: int = 0
    reinstated: int = 0
    fees: int = 0


def dispute_moved(dispute: Mapping[str, Any]) -> Moved:
    """Read a Dispute's `balance_transactions` (the SDK's `Dispute.balance_transactions`, a list of
    `BalanceTransaction`): a withdrawal's `amount` is negative (the money left the balance), a
    reinstatement's positive; `fee` is Stripe's dispute fee. An entry that is not an object (never
    at Stripe: the list is always expanded) is skipped."""
    withdrawn = reinstated = fees = 0
    for txn in dispute.get("balance_transactions") or ():
        if not isinstance(txn, Mapping):
            continue
        amount, fee = int(txn.get("amount") or 0), int(txn.get("fee") or 0)
        category = txn.get("reporting_category")
        if category == WITHDRAWAL:
            withdrawn += -amount
        elif category == REINSTATEMENT:
            reinstated += amount
        else:
            continue
        fees += fee
    return Moved(max(withdrawn, 0), max(reinstated, 0), max(fees, 0))


def _charge_of(dispute: Mapping[str, Any]) -> str:
    charge = dispute.get("charge")
    if isinstance(charge, Mapping):
        charge = charge.get("id")
    return str(charge or "")


# docs/decisions/0014-the-ledger-follows-a-disputes-balance-transactions.md: seven balances, one
# row per dispute, each movement once, the hold bounded by what the charge still has unspent.
def dispute_funds_follow(*, dispute: Mapping[str, Any], source: str) -> DisputeFunds | None:
    """Bring the ledger to what Stripe shows of one dispute's money (see the module). `dispute` is
    Stripe's Dispute object as the caller read or listed it; `source` says who (an event, a run):
    it goes on the entries' notes and the stored read. Returns the dispute's funds row, or None
    when the dispute is on no charge of Vouch's or has moved no money (an inquiry)."""
    dispute_id, charge_id = str(dispute.get("id") or ""), _charge_of(dispute)
    if not dispute_id or not charge_id:
        return None
    funding = FundingLeg.objects.filter(charge_id=charge_id, status=FundingStatus.SUCCEEDED).first()
    if funding is None:
        return None
    moved = dispute_moved(dispute)
    if (
        moved.withdrawn == 0
        and not DisputeFunds.objects.filter(provider_dispute_id=dispute_id).exists()
    ):
        return None  # nothing withdrawn (an inquiry, or not yet): nothing held
    try:
        with transaction.atomic():
            return _follow(dispute, funding, moved, source)
    except IntegrityError:  # a concurrent observer wrote it first: its entries stand
        return DisputeFunds.objects.filter(provider_dispute_id=dispute_id).first()


def _follow(
    dispute: Mapping[str, Any], funding: FundingLeg, moved: Moved, source: str
) -> DisputeFunds:
    dispute_id, status = str(dispute["id"]), str(dispute.get("status") or "")
    envelope = lock_envelope(funding.envelope_id)
    leg = FundingLeg.objects.get(pk=funding.pk)  # as it is under the lock
    funds = DisputeFunds.objects.select_for_update().filter(provider_dispute_id=dispute_id).first()
    if funds is None:
        funds = DisputeFunds.objects.create(
            envelope=envelope,
            funding_leg=leg,
            provider_dispute_id=dispute_id,
            charge_id=leg.charge_id,
            disputed_micro=max(int(dispute.get("amount") or 0), 0) * MICRO_PER_CENT,
            status=DisputeFundsStatus.HELD,
        )
    done = set(funds.journal.values_list("kind", flat=True))
    withdrawn = moved.withdrawn * MICRO_PER_CENT
    reinstated = moved.reinstated * MICRO_PER_CENT
    read: ProviderRead | None = None

    def cited() -> ProviderRead:
        nonlocal read
        if read is None:
            read = provider_read_store(
                purpose="dispute.funds",
                kind="dispute",
                subject=dispute_id,
                envelope_id=envelope.pk,
                answers=[
                    Answer.given({"path": f"/v1/disputes/{dispute_id}", "source": source}, dispute)
                ],
                shows={
                    "dispute": dispute_id,
                    "charge": leg.charge_id,
                    "status": status,
                    "withdrawn": moved.withdrawn,
                    "reinstated": moved.reinstated,
                    "fees": moved.fees,
                },
            )
        return read

    if withdrawn > 0 and JournalEntry.Kind.HOLD not in done:
        held = max(0, min(withdrawn, leg.capacity_micro, envelope.unspent_micro))
        _funding_hold(leg.pk, held=held)
        leg.held_micro += held
        _move(
            envelope,
            JournalEntry.Kind.HOLD,
            unspent=-held,
            held=held,
            funding_leg=leg,
            dispute_funds=funds,
            provider_read=cited(),
            note=f"dispute {dispute_id}: funds withdrawn ({source})"[:200],
        )
        funds.held_micro, funds.exposure_micro = held, withdrawn - held
        done.add(JournalEntry.Kind.HOLD)
    if (
        status == LOST
        and reinstated == 0
        and JournalEntry.Kind.HOLD in done
        and not done & {JournalEntry.Kind.CHARGEBACK, JournalEntry.Kind.REINSTATE}
    ):
        taken = funds.held_micro
        _funding_hold(leg.pk, held=-taken, charged_back=taken)
        _move(
            envelope,
            JournalEntry.Kind.CHARGEBACK,
            held=-taken,
            charged_back=taken,
            funding_leg=leg,
            dispute_funds=funds,
            provider_read=cited(),
            note=f"dispute {dispute_id}: lost ({source})"[:200],
        )
        funds.held_micro, funds.charged_back_micro = 0, funds.charged_back_micro + taken
        funds.status = DisputeFundsStatus.CHARGED_BACK
    if reinstated > 0 and JournalEntry.Kind.REINSTATE not in done:
        from_held = min(reinstated, funds.held_micro)
        from_charged_back = min(reinstated - from_held, funds.charged_back_micro)
        _funding_hold(leg.pk, held=-from_held, charged_back=-from_charged_back)
        _move(
            envelope,
            JournalEntry.Kind.REINSTATE,
            held=-from_held,
            charged_back=-from_charged_back,
            unspent=from_held + from_charged_back,
            funding_leg=leg,
            dispute_funds=funds,
            provider_read=cited(),
            note=f"dispute {dispute_id}: funds reinstated ({source})"[:200],
        )
        covered = reinstated - from_held - from_charged_back  # what came back of the exposure
        funds.held_micro -= from_held
        funds.charged_back_micro -= from_charged_back
        funds.exposure_micro = max(0, funds.exposure_micro - covered)
        funds.status = DisputeFundsStatus.REINSTATED
    funds.withdrawn_micro, funds.reinstated_micro = withdrawn, reinstated
    funds.fees_micro = moved.fees * MICRO_PER_CENT
    funds.provider_status = status[:40]
    if read is not None:
        funds.last_read = read
        audit_record(
            actor=None,
            action="dispute.funds",
            target_type="envelope",
            target_id=envelope.public_id,
            details={
                "dispute": dispute_id,
                "charge": leg.charge_id,
                "status": funds.status,
                "held_micro": funds.held_micro,
                "charged_back_micro": funds.charged_back_micro,
                "exposure_micro": funds.exposure_micro,
                "provider_read": read.public_id,
                "source": source,
            },
        )
    if funds.exposure_micro > 0 and funds.escalation_id is None:
        funds.escalation = _exposure_escalate(funds, envelope, leg)
    elif funds.exposure_micro == 0 and funds.escalation is not None and read is not None:
        escalation_clear(  # Stripe gave back what the charge no longer had: nothing exposed
            escalation=funds.escalation,
            note=f"Cleared: Stripe reinstated the funds of dispute {dispute_id}; nothing is "
            f"exposed any more, as provider read {read.public_id} (SHA-256 {read.sha256}) shows.",
            details={"dispute": dispute_id, "provider_read": read.public_id},
        )
    funds.save()
    return funds


def _exposure_escalate(funds: DisputeFunds, envelope: Envelope, leg: FundingLeg) -> Any:
    """A person's case for money the bank took that the charge no longer had: the platform pays
    it unless the dispute is won. Never taken silently from another charge's money."""
    return escalation_open(
        verdict="EXPOSURE",
        verdict_class=EXPOSURE,
        reason=(
            f"Stripe withdrew {dollars(funds.withdrawn_micro)} for dispute "
            f"{funds.provider_dispute_id} on charge {funds.charge_id} (envelope "
            f"{envelope.public_id}); the charge had only {dollars(funds.held_micro)} "
            f"unspent, now held. {dollars(funds.exposure_micro)} was already debited or "
            "refunded: that is the platform's exposure unless the dispute is won. Decide how to "
            "recover it (contest the dispute, or settle with the buyer); no other charge's money "
            "was taken."
        ),
        # Not a money escalation in the ledger's sense: no adjustment corrects it (the ledger is
        # right: the charge had no more), so a person resolves it with a note once the platform
        # settles it; a won dispute clears it.
        subject=Subject("funding_leg", leg.public_id, money=False),
    )


def dispute_funds_read_and_follow(*, dispute_id: str, source: str) -> DisputeFunds | None:
    """Read the dispute from the provider (outside any transaction) and bring the ledger to what
    it shows: the remedy for a `dispute_funds_mismatch` whose event never came. Raises
    `DisputeUnreadable` when the provider does not show it."""
    read = _provider().dispute_read(dispute_id)
    if not read.accepted:
        raise DisputeUnreadable(
            f"Stripe did not show dispute {dispute_id}: {read.error_code or read.kind.value}"
            f" ({read.error_message or 'no message'}). Check the id (it begins du_ or dp_)."
        )
    return dispute_funds_follow(dispute=read.require(), source=source)


class DisputeUnreadable(Exception):
    """The provider did not show the dispute asked for."""
