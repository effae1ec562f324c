"""A refund leg's reference at the card network: the acquirer reference number (ARN) a buyer's
bank needs to find a refund that "never arrived" (issue 41 item 9; why, and its receipt:
docs/decisions/0020-a-refunds-reference-has-its-own-receipt.md).

Stripe shows it on the Refund (`destination_details.card`, read only through
`providers.refund_reference_of`) once the card network assigns it, days after the refund. Vouch
records what the refund's verified readback showed, then reads the refund again, less and less
often as it ages, until Stripe shows the reference `available` or `unavailable`; after
REFERENCE_WINDOW it stops asking and says the reference is not available. Each read is bounded:
at most REFERENCE_READS_PER_RUN a run, through verification's share of Stripe's budgets, so a day
of refunds costs a handful of reads each, never a read per refund per minute.

Recording never calls the provider; reading never holds a transaction or a lock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.budget import budget_from_settings
from envelopes.locks import lock_leg
from envelopes.models import LegOutcome, ReferenceStatus, RefundLeg
from envelopes.provider_reads import Answer, provider_read_store
from envelopes.services.journal import _provider
from envelopes.signals import refund_leg_reference_known
from providers import refund_reference_of
from verification.contracts import get_contract
from verification.models import Observation, Verdict, VerificationRun

# Stripe's refunds reach a card in 5 to 10 business days (https://docs.stripe.com/refunds); the
# network's reference comes well within that. Past three weeks Vouch stops asking.
REFERENCE_WINDOW = timedelta(days=21)
# The first read again after the verdict, and the most spacing between reads of one refund.
FIRST_READ_AFTER = timedelta(seconds=30)
MAX_SPACING = timedelta(hours=6)
REFERENCE_READS_PER_RUN = 100
# How long a claimed leg is left alone by other workers while its read is in flight.
CLAIM_FOR = timedelta(minutes=5)


def next_read_at(*, started: datetime, now: datetime) -> datetime | None:
    """When a leg whose reference is still pending is read again: after half its age so far
    (FIRST_READ_AFTER at least, MAX_SPACING at most), so a refund is read about a dozen times in
    its first day and four times a day after; None once REFERENCE_WINDOW has passed."""
    age = now - started
    if age >= REFERENCE_WINDOW:
        return None
    spacing = min(max(age / 2, FIRST_READ_AFTER), MAX_SPACING)
    return min(now + spacing, started + REFERENCE_WINDOW)


def refund_leg_reference_record(
    *, leg: RefundLeg, refund: Mapping[str, Any], sha256: str, seen_at: datetime
) -> RefundLeg:
    """Record the reference `refund` (the provider's Refund for this leg, read at `seen_at`, its
    bytes' SHA-256 `sha256`) shows, under the leg's lock, and when to read it again. A reference
    once recorded available is never overwritten or taken back; a refund without card details is
    not followed. Announces a newly available reference (`refund_leg_reference_known`) inside the
    transaction, for its receipt. Never calls the provider."""
    shown = refund_reference_of(refund)
    with transaction.atomic():
        fresh = lock_leg(leg.pk)
        if fresh.refund_reference_status in (
            ReferenceStatus.AVAILABLE,
            ReferenceStatus.UNAVAILABLE,
        ):
            return fresh  # settled: Stripe does not change it, and what was shown stays
        if refund.get("id") != fresh.provider_refund_id or shown is None:
            fresh.refund_reference_next_at = None
            fresh.save(update_fields=["refund_reference_next_at"])
            return fresh
        fresh.refund_reference_status = shown.status
        fresh.refund_reference = shown.reference
        fresh.refund_reference_type = shown.type
        fresh.refund_reference_seen_at = seen_at
        fresh.refund_reference_sha256 = sha256
        fresh.refund_reference_next_at = None
        if not shown.settled:
            started = fresh.decided_at or fresh.reserved_at
            fresh.refund_reference_next_at = next_read_at(started=started, now=seen_at)
            if fresh.refund_reference_next_at is None:
                fresh.refund_reference_status = ReferenceStatus.NOT_AVAILABLE
        fresh.save(
            update_fields=[
                "refund_reference",
                "refund_reference_status",
                "refund_reference_type",
                "refund_reference_seen_at",
                "refund_reference_sha256",
                "refund_reference_next_at",
            ]
        )
        if fresh.refund_reference_status == ReferenceStatus.AVAILABLE:
            refund_leg_reference_known.send(sender=RefundLeg, leg=fresh)
    return fresh


def verified_readback(run: VerificationRun) -> Observation | None:
    """The deciding attempt's observation of the run's refund readback (its contract's `http`
    channel reading a refund), or None."""
    if run.decided_by_id is None:
        return None
    channels = [
        channel.name
        for channel in get_contract(run.contract_id).channels
        if channel.verifier == "http" and channel.read is not None
        and channel.read.resource == "refund"
    ]  # fmt: skip
    return (
        Observation.objects.filter(attempt_id=run.decided_by_id, channel__in=channels)
        .order_by("id")
        .first()
    )


def refund_leg_reference_on_verdict(*, run: VerificationRun) -> None:
    """A refund leg's run decided VERIFIED: record the reference its readback showed (pending, as
    a rule: the network assigns it later) and start following it."""
    if run.verdict != Verdict.VERIFIED:
        return
    leg = RefundLeg.objects.filter(verification_run=run, outcome=LegOutcome.ACCEPTED).first()
    observation = verified_readback(run)
    if leg is None or observation is None or not isinstance(observation.data, dict):
        return
    refund_leg_reference_record(
        leg=leg, refund=observation.data, sha256=observation.digest, seen_at=observation.observed_at
    )


def refund_references_due(*, now: datetime, limit: int) -> list[RefundLeg]:
    """Legs whose reference is due to be read again, oldest due first."""
    return list(
        RefundLeg.objects.filter(
            Q(refund_reference_next_at__lte=now),
            outcome=LegOutcome.ACCEPTED,
        ).order_by("refund_reference_next_at", "id")[:limit]
    )


def refund_references_follow_up(
    *, now: datetime | None = None, limit: int = REFERENCE_READS_PER_RUN
) -> int:
    """The scheduled follow-up: read each due leg's refund once (claimed first, so two workers
    never read one leg at once), store the read with its SHA-256, and record what it shows. A
    read that gets no answer is tried at the next spacing; a leg past the window is marked not
    available without a read. Returns how many refunds were read."""
    now = now or timezone.now()
    read = 0
    for leg in refund_references_due(now=now, limit=limit):
        claimed = RefundLeg.objects.filter(
            pk=leg.pk, refund_reference_next_at=leg.refund_reference_next_at
        ).update(refund_reference_next_at=now + CLAIM_FOR)
        if not claimed:
            continue  # another worker has it
        started = leg.decided_at or leg.reserved_at
        if next_read_at(started=started, now=now) is None:
            RefundLeg.objects.filter(pk=leg.pk).update(
                refund_reference_status=ReferenceStatus.NOT_AVAILABLE,
                refund_reference_next_at=None,
            )
            continue
        outcome = _provider().refund_read(
            leg.provider_refund_id, budget=budget_from_settings("verification")
        )
        read += outcome.sent
        if not outcome.accepted:
            RefundLeg.objects.filter(pk=leg.pk).update(
                refund_reference_next_at=next_read_at(started=started, now=now)
            )
            continue
        stored = provider_read_store(
            purpose="refund_reference",
            answers=[Answer.of({"path": f"/v1/refunds/{leg.provider_refund_id}"}, outcome)],
            shows={"reference": _shows(outcome.require())},
            envelope_id=leg.operation.envelope_id,
            kind="refund_leg",
            subject=leg.public_id,
        )
        refund_leg_reference_record(
            leg=leg, refund=outcome.require(), sha256=stored.sha256, seen_at=stored.observed_at
        )
    return read


def _shows(refund: Mapping[str, Any]) -> dict[str, str] | None:
    shown = refund_reference_of(refund)
    if shown is None:
        return None
    return {"status": shown.status, "reference": shown.reference, "type": shown.type}
