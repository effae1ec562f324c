"""Provider charges compared with the funding legs that record them (charge_mismatch, and
charge_refunded_mismatch: what the charge shows refunded against what the legs hold), charges
carrying Vouch's funding metadata that no leg records (funding_unrecorded), and a funded leg's
charge read alone (charge_missing)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q, Sum
from django.db.models.functions import Coalesce

from envelopes.models import (
    MICRO_PER_CENT,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    FundingLeg,
    FundingStatus,
    LegOutcome,
    RefundLeg,
)
from envelopes.money import to_cents
from providers import Outcome, Page, StripeProvider
from reconciliation.engine.refunds import _refunds
from reconciliation.engine.shared import (
    _committed_lazily,
    _Context,
    _count,
    _differing,
    _found,
    _id,
    _micro,
    _observation,
    _observe,
    _read,
    _stored,
)
from reconciliation.models import DiscrepancyClass, Observation, Run
from reconciliation.services import Finding
from verification import clock


def _refund_totals(funding_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per funding leg: what its live legs hold, what its open legs might, and the foreign
    refunds recorded on it (micro-dollars)."""
    totals: dict[int, dict[str, int]] = {f: {"held": 0, "open": 0} for f in funding_ids}
    # In no order: RefundLeg's default ordering would join every refund operation to group them.
    rows = (
        RefundLeg.objects.filter(funding_leg_id__in=funding_ids)
        .order_by()
        .values("funding_leg_id")
        .annotate(
            held=Sum("amount_micro", filter=Q(outcome=LegOutcome.ACCEPTED, released=False)),
            open=Sum(
                "amount_micro", filter=Q(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN))
            ),
        )
    )
    for row in rows:
        totals[row["funding_leg_id"]]["held"] += row["held"] or 0
        totals[row["funding_leg_id"]]["open"] += row["open"] or 0
    foreign = (
        Adjustment.objects.filter(
            Q(funding_leg_id__in=funding_ids) | Q(refund_leg__funding_leg_id__in=funding_ids),
            kind=AdjustmentKind.FOREIGN_REFUND,
            status=AdjustmentStatus.APPLIED,
            released_at__isnull=True,  # given back since: the provider showed it failed
        )
        .annotate(charged=Coalesce("funding_leg_id", "refund_leg__funding_leg_id"))
        .values("charged")
        .annotate(s=Sum("amount_micro"))
        .order_by()
    )
    for charged, amount in foreign.values_list("charged", "s"):
        # recorded on the funding leg, or on a leg of it (a duplicate)
        totals[charged]["held"] += amount or 0
    return totals


def _charges(ctx: _Context, charges: list[dict[str, Any]], observation: Observation) -> list[str]:
    ids = [str(c["id"]) for c in charges]
    fundings = {
        f.charge_id: f
        for f in FundingLeg.objects.select_related("envelope").order_by().filter(charge_id__in=ids)
    }
    totals = _refund_totals([f.pk for f in fundings.values()])
    explained = set(ctx.explained)
    # Charges no leg records that carry Vouch's funding metadata (most pages: none), with the leg
    # they name.
    unrecorded = {
        str(c["id"]): c
        for c in charges
        if str(c["id"]) not in fundings and _funding_named(c) and _taken(c)
    }
    named = (
        {
            f.public_id: f
            for f in FundingLeg.objects.select_related("envelope")
            .order_by()
            .filter(public_id__in={_funding_named(c) for c in unrecorded.values()})
        }
        if unrecorded
        else {}
    )
    seen = []
    for charge in charges:
        funding = fundings.get(str(charge["id"]))
        if funding is None:
            if str(charge["id"]) in unrecorded:
                _count(ctx, "charge")
                _charge_unrecorded(ctx, charge, named.get(_funding_named(charge)), observation)
            continue  # else not a Vouch charge
        _count(ctx, "charge")
        seen.append(funding.charge_id)
        if funding.status != FundingStatus.SUCCEEDED:
            continue  # a pending leg's charge: the stuck phase names it if it stays so
        _charge_of_funding(ctx, funding, charge, totals[funding.pk], explained, observation)
    return seen


def _funding_named(charge: dict[str, Any]) -> str:
    metadata = charge.get("metadata") or {}
    return str(metadata.get("vouch_funding") or "") if isinstance(metadata, dict) else ""


def _taken(charge: dict[str, Any]) -> bool:
    """The charge took the buyer's money, or may still (a failed one took nothing)."""
    return charge.get("status") in ("succeeded", "pending")


def _charge_unrecorded(
    ctx: _Context, charge: dict[str, Any], leg: FundingLeg | None, observation: Observation
) -> None:
    """A charge carrying Vouch's funding metadata that no funding leg records by its id: the
    buyer paid money Vouch counts nowhere (its leg pending past the grace, abandoned, recording
    another charge, or not there at all). Inside the grace, a pending leg is Vouch's own work in
    flight: its answer is being recorded."""
    if leg is not None and leg.status == FundingStatus.PENDING and ctx.recent(leg.created_at):
        ctx.run.expected += 1
        return
    charge_id, amount = str(charge["id"]), charge.get("amount")
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.FUNDING_UNRECORDED,
            subject_type="charge",
            subject_id=charge_id,
            summary=f"Charge {charge_id} of {amount} cents carries funding leg "
            f"{_funding_named(charge)}, which "
            + (f"is {leg.status} and records no such charge." if leg else "Vouch does not have."),
            vouch_side={
                "charge": leg.charge_id if leg else "",
                "funding": leg.public_id if leg else "",
                "status": leg.status if leg else "",
                "amount": to_cents(leg.amount_micro) if leg else None,
            },
            provider_side={
                "charge": charge_id,
                "funding": _funding_named(charge),
                "status": charge.get("status"),
                "amount": amount,
                "payment_intent": _id(charge.get("payment_intent")),
            },
            differing=["charge", "status"] if leg else ["charge", "funding", "status"],
            charge_id=charge_id,
            envelope_public_id=leg.envelope.public_id if leg else "",
            amount_micro=_micro(amount),
            observation=observation,
            escalate_as=("funding_leg", leg.public_id) if leg else None,
        ),
    )


def _charge_of_funding(
    ctx: _Context,
    funding: FundingLeg,
    charge: dict[str, Any],
    totals: dict[str, int],
    explained: set[str],
    observation: Observation,
) -> None:
    # What the legs hold (less, in a dry run, what it would release).
    held = totals["held"] - ctx.would_release.get(funding.charge_id, 0)
    vouch = {
        "charge": funding.charge_id,
        "status": "succeeded",
        "amount": to_cents(funding.amount_micro),
        "currency": funding.envelope.currency,
        "amount_refunded": held // MICRO_PER_CENT,
    }
    provider = {
        "charge": str(charge["id"]),
        "status": charge.get("status"),
        "amount": charge.get("amount"),
        "currency": charge.get("currency"),
        "amount_refunded": charge.get("amount_refunded"),
    }
    envelope = funding.envelope.public_id
    differing = _differing(vouch, provider, ("status", "amount", "currency"))
    if differing:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.CHARGE_MISMATCH,
                subject_type="funding_leg",
                subject_id=funding.public_id,
                summary=f"Charge {funding.charge_id} differs from funding leg "
                f"{funding.public_id} in " + ", ".join(differing),
                vouch_side=vouch,
                provider_side=provider,
                differing=differing,
                charge_id=funding.charge_id,
                envelope_public_id=envelope,
                amount_micro=funding.amount_micro,
                observation=observation,
            ),
        )
    refunded = provider["amount_refunded"]
    if isinstance(refunded, bool) or not isinstance(refunded, int):
        refunded = -1
    at_provider = refunded * MICRO_PER_CENT
    in_flight = totals["open"] + ctx.in_flight.get(funding.charge_id, 0)
    if held <= at_provider <= held + in_flight or funding.charge_id in explained:
        return
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.CHARGE_REFUNDED_MISMATCH,
            subject_type="funding_leg",
            subject_id=funding.public_id,
            summary=f"Charge {funding.charge_id} shows {refunded} cents refunded; Vouch's legs "
            f"on it hold {held // MICRO_PER_CENT} cents.",
            vouch_side=vouch,
            provider_side=provider,
            differing=["amount_refunded"],
            charge_id=funding.charge_id,
            envelope_public_id=envelope,
            amount_micro=abs(at_provider - held),
            observation=observation,
        ),
    )


def _funding_alone(ctx: _Context, funding: FundingLeg) -> Observation:
    """A funded leg's charge read alone: compared, or missing at the provider."""
    outcome, observation = _read(ctx, "charge", funding.charge_id)
    if outcome.accepted:
        _charges(ctx, [outcome.require()], observation)
        return observation
    _count(ctx, "charge")
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.CHARGE_MISSING,
            subject_type="funding_leg",
            subject_id=funding.public_id,
            summary=f"Funding leg {funding.public_id} records charge {funding.charge_id}; the "
            "provider has no such charge.",
            vouch_side={
                "charge": funding.charge_id,
                "status": "succeeded",
                "amount": to_cents(funding.amount_micro),
            },
            provider_side={"charge": "", "status": "", "amount": None},
            differing=["charge", "status", "amount"],
            charge_id=funding.charge_id,
            envelope_public_id=funding.envelope.public_id,
            amount_micro=funding.amount_micro,
            observation=observation,
        ),
    )
    return observation


def charge_compare(
    *, run: Run, provider: StripeProvider, charge: Outcome, refund_pages: list[Page]
) -> None:
    """One charge compared with the ledger as a sweep compares it (SPEC §15.1), from reads made
    already — outside any transaction, before `run` was created — by a caller that looks at one
    charge (reconciliation.events, at a provider event): each page of the charge's refunds,
    stored with its SHA-256 and compared first, as the listing compares refunds before charges (a
    refund nobody here made is `refund_foreign`, which explains the charge's total), then the
    charge itself (`charge_refunded_mismatch` for what its refunds do not explain). Findings are
    recorded on `run` like any run's; nothing is cleared (only a run's clearing phase clears)."""
    ctx = _Context(
        run=run,
        provider=provider,
        budget=None,  # no read is made here
        now=clock.now(),
        grace=timedelta(seconds=settings.RECONCILIATION_GRACE_S),
        progress=None,
    )
    for page in refund_pages:
        run.pages += 1
        run.provider_calls += page.attempts
        listed: dict[str, Any] = {"path": "/v1/refunds", "params": page.params}
        observation = _observation(ctx, "refunds", listed, _stored(page.body))
        _refunds(ctx, page.data, observation)
        if observation.pk is None:
            with _committed_lazily():
                observation.save(force_insert=True)
    run.provider_calls += charge.attempts
    found = charge.require()
    request: dict[str, Any] = {
        "path": f"/v1/charges/{found['id']}",
        "http_status": charge.http_status,
    }
    observation = (
        _observe(ctx, "charge", request, body=charge.body)
        if charge.body is not None
        else _observe(ctx, "charge", request, found)
    )
    _charges(ctx, [found], observation)
