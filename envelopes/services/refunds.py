"""Refunds: reserve the legs and commit (the recovery point), call the provider per leg outside any
transaction, record each answer once; past the key's life, look the refund up instead."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core import db
from core.crash import crash_point
from core.idempotency import (
    idempotency_attach_statements,
    idempotency_attached,
    idempotency_renew,
)
from envelopes.exceptions import (
    InvalidAmount,
    RefundChanged,
)
from envelopes.locks import lock_envelope, lock_envelope_with_funding
from envelopes.models import (
    Envelope,
    JournalEntry,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from envelopes.money import to_cents
from envelopes.services.allocation import refund_allocate
from envelopes.services.journal import (
    PROVIDER_KEY_TTL,
    _funding_move_statement,
    _move_statements,
    _provider,
    legs_waiting,
)
from envelopes.services.releases import refund_leg_release
from providers import Outcome, OutcomeKind
from verification import clock
from verification.models import Verdict, VerificationRun
from verification.services import (
    PreparedRun,
    escalation_open,
    verification_prepare,
)
from verification.subjects import Subject

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord

REFUND_CONTRACT = "stripe.refund.created"


def envelope_refund(
    *,
    envelope: Envelope | None = None,
    envelope_id: str | None = None,
    actor: User,
    amount_micro: Any = None,
    idempotency: IdempotencyRecord | None = None,
    expected: tuple[int, list[tuple[str, int]]] | None = None,
) -> RefundOperation:
    """Return unspent money to the funding cards (SPEC §3). Phase 1 reserves the legs and commits
    (the recovery point); phase 2 calls the provider per leg outside any transaction; phase 3
    records each outcome. `expected`: the refund a person confirmed, (requested micro, [(funding
    id, micro), …]); if the allocation made under the envelope's lock differs, RefundChanged and
    nothing is reserved.

    Phase 1 is one transaction of two round trips to PostgreSQL (core.db.Transaction: BEGIN sent
    with the first, COMMIT with the second): the envelope locked with its funding legs, then every
    write (the operation, each leg with its funding leg's and the envelope's movement and journal
    entry, the idempotency record naming the operation) as one batch of plain SQL."""
    if idempotency is not None and idempotency.resource:  # a resumed request: continue it
        operation = RefundOperation.objects.get(public_id=idempotency.resource)
        return refund_send(operation=operation, idempotency=idempotency)
    if amount_micro is not None and (
        not isinstance(amount_micro, int) or isinstance(amount_micro, bool) or amount_micro <= 0
    ):
        raise InvalidAmount("amount_micro must be a positive integer number of micro-dollars.")
    with db.Transaction() as reserve:
        if envelope is not None:
            locked, funding = lock_envelope_with_funding(envelope_id=envelope.pk, within=reserve)
        else:  # the API: find and lock the caller's envelope (another's answers as a missing one)
            locked, funding = lock_envelope_with_funding(
                public_id=str(envelope_id), owner=actor, within=reserve
            )
        allocation = refund_allocate(locked, amount_micro, funding)
        if expected is not None and expected != allocation.shape:
            raise RefundChanged(details={"unspent_micro": locked.unspent_micro})
        operation = RefundOperation(
            envelope=locked,
            requested_micro=allocation.requested,
            remainder_micro=allocation.requested - allocation.total,
            created_by=actor,
        )
        writes = [db.insert(operation)]
        now = timezone.now()
        reserved: list[tuple[RefundLeg, int]] = []  # each leg, and its INSERT's place in `writes`
        for sequence, (funding_leg, amount) in enumerate(allocation.legs, start=1):
            leg = RefundLeg(
                operation=operation,
                funding_leg=funding_leg,
                sequence=sequence,
                amount_micro=amount,
                reserved_at=now,
            )
            leg.idempotency_key = f"{operation.public_id}:{leg.public_id}"
            reserved.append((leg, len(writes)))
            funding_leg.reserved_micro += amount
            writes += [
                db.insert(leg, operation_id=db.Ref(RefundOperation, operation.public_id)),
                _funding_move_statement(funding_leg.pk, reserved=amount),
                *_move_statements(
                    locked,
                    JournalEntry.Kind.RESERVE,
                    reserved=amount,
                    unspent=-amount,
                    refund_leg=db.Ref(RefundLeg, leg.public_id),
                ),
            ]
        writes += idempotency_attach_statements(idempotency, operation.public_id)
        results = reserve.execute(writes, commit=True)
        db.inserted(operation, results[0])
        for leg, index in reserved:
            db.inserted(leg, results[index])
            leg.operation = operation  # now saved: sets operation_id
        idempotency_attached(idempotency, operation.public_id)
    crash_point("refund_after_reserve")
    legs = [leg for leg, _ in reserved]
    refund_send(operation=operation, legs=legs, idempotency=idempotency)
    operation.recorded_legs = legs  # each recorded in place by refund_leg_record
    return operation


def refund_send(
    *,
    operation: RefundOperation,
    legs: list[RefundLeg] | None = None,
    idempotency: IdempotencyRecord | None = None,
) -> RefundOperation:
    """Send every leg not yet answered (reserved or unknown) with its own idempotency key, and
    record each answer. Safe to call again at any time: the key makes the provider replay.
    `legs`: the legs just reserved, when the caller has them at hand. The request's lease is
    renewed before each leg's call, so it covers as many calls as there are legs."""
    if legs is None:
        legs = list(
            operation.legs.select_related("funding_leg", "operation__envelope")
            # A leg waiting for room in Stripe's rate limit is the worker's to send, in its turn.
            .filter(outcome__in=_OPEN, deferred_at__isnull=True)
            .order_by("sequence")
        )
    for leg in legs:
        refund_leg_send(leg=leg, idempotency=idempotency)
    crash_point("refund_after_record")
    return operation


def refund_leg_send(
    *,
    leg: RefundLeg,
    idempotency: IdempotencyRecord | None = None,
    queued_since: datetime | None = None,
) -> RefundLeg:
    """Send one leg (again: the key makes it safe) and record the answer. Once the provider may
    have forgotten the key, sending again could refund twice: the refund is looked up instead.

    Stripe's rate limit (issue 40): when legs are already waiting for room, this one joins them at
    the end of the queue without calling (first come, first sent); when the call finds no room
    within its wait (`core.budget`: half a second in a web request), nothing was sent and the leg
    waits (`deferred_at`) for the worker (`envelopes.services.waiting`), which passes
    `queued_since`, the leg's place in the queue, kept if it finds no room either."""
    expired = clock.now() - leg.reserved_at > PROVIDER_KEY_TTL
    if queued_since is None and not expired and legs_waiting(RefundLeg):
        return refund_leg_defer(leg)  # no call: the request's lease needs no renewal for it
    idempotency_renew(idempotency)
    if expired:
        return refund_leg_find(leg=leg)
    envelope = leg.operation.envelope
    outcome = _provider().refund_create(
        charge=leg.funding_leg.charge_id,
        amount_cents=to_cents(leg.amount_micro),
        idempotency_key=leg.idempotency_key,
        metadata={
            "vouch_envelope": envelope.public_id,
            "vouch_refund": leg.operation.public_id,
            "vouch_leg": leg.public_id,
        },
    )
    crash_point("refund_after_provider_call")
    if outcome.not_sent:  # no room in Stripe's rate limit: nothing went out
        return refund_leg_defer(leg, since=queued_since)
    if outcome.unknown and outcome.replayed:
        # The provider keeps an unknown answer (a 500 after its endpoint began) under the key and
        # replays it to every retry: only reading the charge's refunds can tell.
        found = _refund_of_leg(leg)
        if found is not None:
            outcome = Outcome(OutcomeKind.ACCEPTED, found)
    return refund_leg_record(leg=leg, outcome=outcome)


def refund_leg_defer(leg: RefundLeg, *, since: datetime | None = None) -> RefundLeg:
    """The leg waits for room in Stripe's rate limit, its money still reserved: `since` its place
    in the queue (now: the end). A leg answered meanwhile is left as it is."""
    at = since or timezone.now()
    RefundLeg.objects.filter(pk=leg.pk, outcome__in=_OPEN).update(deferred_at=at)
    leg.deferred_at = at
    return leg


def _refund_of_leg(leg: RefundLeg) -> dict[str, Any] | None:
    """The provider's refund carrying this leg's metadata among its charge's refunds, or None
    (not found, or the list could not be read)."""
    listing = _provider().refunds_of_charge(leg.funding_leg.charge_id)
    return _carrying(listing.require()["data"], leg) if listing.accepted else None


def _carrying(refunds: list[dict[str, Any]], leg: RefundLeg) -> dict[str, Any] | None:
    """The refund among `refunds` whose metadata names this leg."""
    for refund in refunds:
        if (refund.get("metadata") or {}).get("vouch_leg") == leg.public_id:
            return dict(refund)
    return None


class _AlreadyRecorded(Exception):
    """Another caller recorded this leg first: roll back what this one began."""


_OPEN = [LegOutcome.RESERVED, LegOutcome.UNKNOWN]


def _accepted_statements(
    leg: RefundLeg, refund: dict[str, Any], now: datetime
) -> tuple[PreparedRun, list[db.Statement], int]:
    """An accepted leg's record, as one batch: the envelope's movement (its UPDATE first: the
    envelope's row lock before the leg's), the verification run and its keys, the leg's
    conditional UPDATE (second to last: 0 rows if recorded meanwhile), the funding leg's
    movement (last); and the place of the run's INSERT. The envelope's UPDATE returns its row.
    A run that exists already (the leg was recorded) fails its INSERT."""
    amount = leg.amount_micro
    run = verification_prepare(
        contract_id=REFUND_CONTRACT,
        operation_id=leg.idempotency_key,
        operation_created_at=leg.reserved_at,
        input={"charge": leg.funding_leg.charge_id, "amount": to_cents(amount)},
        action_result=refund,
    )
    table = connection.ops.quote_name(RefundLeg._meta.db_table)
    run_id, run_params = db.Ref(VerificationRun, run.run.public_id).sql()
    leg_update = db.Statement(
        f"UPDATE {table} SET outcome = %s, provider_refund_id = %s, decided_at = %s, "  # noqa: S608
        f"verification_run_id = {run_id}, attempts = attempts + 1, deferred_at = NULL "
        "WHERE id = %s AND outcome IN (%s, %s)",
        (
            LegOutcome.ACCEPTED.value,
            refund["id"],
            connection.ops.adapt_datetimefield_value(now),
            *run_params,
            leg.pk,
            *(outcome.value for outcome in _OPEN),
        ),
    )
    movement = _move_statements(
        leg.operation.envelope_id,
        JournalEntry.Kind.ACCEPT,
        reserved=-amount,
        refunded=amount,
        refund_leg=leg,
        returning=True,
    )
    funding = _funding_move_statement(leg.funding_leg_id, reserved=-amount, refunded=amount)
    return run, [*movement, *run.statements(), leg_update, funding], len(movement)


def _open_leg(leg: RefundLeg) -> QuerySet[RefundLeg]:
    return RefundLeg.objects.filter(pk=leg.pk, outcome__in=_OPEN)


def refund_leg_record(*, leg: RefundLeg, outcome: Outcome) -> RefundLeg:
    """Record one leg's answer, once: accepted (reserved -> refunded, and a verification run),
    refused (reserved -> unspent), unknown (stays reserved). The envelope's row lock serializes
    every change to its legs; the leg's transition is a conditional update, so a second recorder
    (a retry and the resume job both answered) changes nothing."""
    now = timezone.now()
    envelope_id = leg.operation.envelope_id
    recorded_envelope = None
    leg.operation.recorded_envelope = None
    try:
        # Each branch's first statement updates the envelope, which takes its row lock before the
        # leg's (the lock order); a leg recorded meanwhile rolls everything back.
        if outcome.accepted:  # one transaction of one round trip (core.db.execute_atomic)
            refund = outcome.require()
            run, writes, run_at = _accepted_statements(leg, refund, now)
            results = db.execute_atomic(writes, must_change=len(writes) - 2)  # the leg's UPDATE
            run.saved(results[run_at])
            recorded_envelope = db.instances(Envelope, results[0])[0]
            changed = {
                "outcome": LegOutcome.ACCEPTED,
                "provider_refund_id": refund["id"],
                "decided_at": now,
                "verification_run": run.run,
                "deferred_at": None,
            }
        else:
            with transaction.atomic():
                if outcome.refused:
                    code = outcome.error_code or "refused"
                    lock_envelope(envelope_id)  # the lock order: envelope, then leg
                    changed = {
                        "outcome": LegOutcome.REFUSED,
                        "error_code": code,
                        "decided_at": now,
                        "deferred_at": None,  # an answer ends any wait for room
                    }
                    if not _open_leg(leg).update(attempts=F("attempts") + 1, **changed):
                        raise _AlreadyRecorded
                    # The money goes back through the one release service, like every release.
                    refund_leg_release(leg=leg, reason=f"refused: {code}")
                    changed["released"] = True
                else:
                    # No money moves: the conditional update alone decides (no envelope lock).
                    changed = {
                        "outcome": LegOutcome.UNKNOWN,
                        "error_code": outcome.error_code or "unknown",
                        "deferred_at": None,  # sent: the stranded-leg job follows it now
                    }
                    if not _open_leg(leg).update(attempts=F("attempts") + 1, **changed):
                        raise _AlreadyRecorded
    except (_AlreadyRecorded, db.NothingChanged, IntegrityError):  # recorded first by another
        leg.refresh_from_db()
        return leg
    for name, value in changed.items():
        setattr(leg, name, value)
    leg.attempts += 1
    leg.operation.recorded_envelope = recorded_envelope
    return leg


def refund_leg_find(*, leg: RefundLeg) -> RefundLeg:
    """After the provider has forgotten the key: look the refund up by our metadata among the
    charge's refunds. Found: accepted. Not found: the provider never made it (or shows no trace
    of it): one escalation, with its notification, which a person resolves by an adjustment under
    four eyes (release the money, or accept the leg naming the provider refund). The money stays
    reserved until then: never assumed either way."""
    listing = _provider().refunds_of_charge(leg.funding_leg.charge_id)
    if not listing.accepted:
        return leg
    refund = _carrying(listing.require()["data"], leg)
    if refund is not None:
        return refund_leg_record(leg=leg, outcome=Outcome(OutcomeKind.ACCEPTED, refund))
    escalation_open(
        verdict=Verdict.UNVERIFIABLE,
        verdict_class="not at the provider",
        reason=f"Refund leg {leg.public_id} ({leg.amount_micro:,} micro on charge "
        f"{leg.funding_leg.charge_id}) has no answer, its idempotency key has expired at the "
        "provider, and none of the charge's refunds carries its metadata. The money stays "
        "reserved. Check the Stripe Dashboard, then propose an adjustment: release the money "
        "(the provider never made the refund), or accept the leg naming the provider refund.",
        subject=Subject("refund_leg", leg.public_id, money=True),
    )
    return leg
