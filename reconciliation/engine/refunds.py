"""Provider refunds compared with the legs that record them (refund_mismatch,
refund_status_drift, refund_duplicate), with the adjustments that recorded a foreign refund, or
with nothing (refund_foreign); an accepted leg's refund read alone (refund_missing); and the one
automatic correction, the release of a refund the provider shows failed or canceled."""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet

from envelopes.models import (
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    FundingLeg,
    LegOutcome,
    RefundLeg,
)
from envelopes.money import to_cents
from envelopes.services import foreign_refund_release, refund_leg_release
from reconciliation.engine.shared import (
    GONE,
    LIVE,
    _Context,
    _count,
    _differing,
    _found,
    _id,
    _leg_named,
    _micro,
    _read,
)
from reconciliation.models import DiscrepancyClass, Observation
from reconciliation.services import Finding


def _refunds(ctx: _Context, refunds: list[dict[str, Any]], observation: Observation) -> list[str]:
    """Compare a page of provider refunds; returns the ids that a leg records (seen)."""
    ids = [str(r["id"]) for r in refunds]
    # The legs with their charge's id only: a page's envelopes are read only for what it finds
    # (select_related's joins to the operations and envelopes cost more than the rest of a page).
    by_refund = {leg.provider_refund_id: leg for leg in _legs().filter(provider_refund_id__in=ids)}
    # Only the refunds no leg records need their named leg, their charge's funding leg, and
    # whether a person recorded them (most pages: none).
    unrecorded = [r for r in refunds if str(r["id"]) not in by_refund]
    names = {name for r in unrecorded if (name := _leg_named(r))}
    by_name = (
        {
            leg.public_id: leg
            for leg in RefundLeg.objects.select_related("funding_leg", "operation__envelope")
            .order_by()
            .filter(public_id__in=names)
        }
        if names
        else {}
    )
    charges = {_id(r.get("charge")) for r in unrecorded}
    fundings = (
        {
            f.charge_id: f
            for f in FundingLeg.objects.select_related("envelope")
            .order_by()
            .filter(charge_id__in=charges)
        }
        if charges
        else {}
    )
    recorded = (
        {
            adjustment.provider_object_id: adjustment
            for adjustment in Adjustment.objects.select_related(
                "funding_leg__envelope", "refund_leg__funding_leg__envelope"
            )
            .order_by()
            .filter(
                kind=AdjustmentKind.FOREIGN_REFUND,
                status=AdjustmentStatus.APPLIED,
                provider_object_id__in=[str(r["id"]) for r in unrecorded],
            )
        }
        if unrecorded
        else {}
    )
    seen = []
    for refund in refunds:
        refund_id, charge_id = str(refund["id"]), _id(refund.get("charge"))
        leg = by_refund.get(refund_id)
        adjustment = recorded.get(refund_id) if leg is None else None
        funding = fundings.get(charge_id) if leg is None else None
        ours = leg or adjustment or funding or _leg_named(refund) in by_name
        if not ours:
            continue  # not on a Vouch charge: not ours to compare
        _count(ctx, "refund")
        if leg is not None:
            seen.append(refund_id)
            _refund_of_leg(ctx, leg, refund, observation)
        elif adjustment is not None:  # a foreign refund a person recorded by an adjustment
            _refund_recorded(ctx, adjustment, refund, observation)
        else:
            _refund_unrecorded(ctx, refund, by_name.get(_leg_named(refund)), funding, observation)
    return seen


def _legs() -> QuerySet[RefundLeg]:
    """Refund legs with their funding charge's id (`charge_of`), in no order."""
    return RefundLeg.objects.order_by().annotate(charge_of=F("funding_leg__charge_id"))


def _charge_of(leg: RefundLeg) -> str:
    """The id of the charge a leg refunds (annotated by `_legs`, else its funding leg's)."""
    charge = getattr(leg, "charge_of", None)
    return str(charge) if charge is not None else leg.funding_leg.charge_id


def _envelope_of(leg: RefundLeg) -> str:
    """The public id of a leg's envelope (read when a finding names it)."""
    return leg.operation.envelope.public_id


def _refund_sides(leg: RefundLeg, refund: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    live = leg.outcome == LegOutcome.ACCEPTED and not leg.released
    vouch = {
        "refund": leg.provider_refund_id,
        "charge": _charge_of(leg),
        "amount": to_cents(leg.amount_micro),
        "vouch_leg": leg.public_id,
        "status": "live" if live else ("released" if leg.released else leg.outcome),
        "leg_outcome": leg.outcome,
    }
    provider = {
        "refund": str(refund.get("id")),
        "charge": _id(refund.get("charge")),
        "amount": refund.get("amount"),
        "vouch_leg": _leg_named(refund),
        "status": refund.get("status"),
        "leg_outcome": "",
    }
    return vouch, provider


def _refund_of_leg(
    ctx: _Context, leg: RefundLeg, refund: dict[str, Any], observation: Observation
) -> None:
    """A provider refund that a leg records: same charge, amount and leg name; a status that
    agrees with the leg (live for a live leg; a released leg's refund failed or canceled)."""
    vouch, provider = _refund_sides(leg, refund)
    differing = _differing(vouch, provider, ("charge", "amount", "vouch_leg"))
    if differing:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.REFUND_MISMATCH,
                subject_type="refund_leg",
                subject_id=leg.public_id,
                summary=f"Refund {provider['refund']} differs from leg {leg.public_id} in "
                + ", ".join(differing),
                vouch_side=vouch,
                provider_side=provider,
                differing=differing,
                charge_id=vouch["charge"],
                envelope_public_id=_envelope_of(leg),
                amount_micro=leg.amount_micro,
                observation=observation,
            ),
        )
    # A leg records its refund's id only once accepted (an answer, or a person's adjustment):
    # it is live until released.
    status = refund.get("status")
    if not leg.released and status in GONE:
        _release(ctx, leg, refund)
    elif leg.released and status in LIVE:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.REFUND_STATUS_DRIFT,
                subject_type="refund_leg",
                subject_id=leg.public_id,
                summary=f"Leg {leg.public_id} was released, but the provider shows its refund "
                f"{provider['refund']} {status}: the money went back to the buyer and is "
                "counted unspent here too.",
                vouch_side=vouch,
                provider_side=provider,
                differing=["status"],
                charge_id=vouch["charge"],
                envelope_public_id=_envelope_of(leg),
                amount_micro=leg.amount_micro,
                observation=observation,
            ),
        )


def _release(ctx: _Context, leg: RefundLeg, refund: dict[str, Any]) -> None:
    """The one automatic correction: the provider shows the refund failed or canceled and the
    leg was never released — released through the one release service, as the webhook would."""
    if ctx.run.dry_run:
        charge = _charge_of(leg)
        ctx.would_release[charge] = ctx.would_release.get(charge, 0) + leg.amount_micro
        ctx.run.corrected += 1
        return
    if refund_leg_release(
        leg=leg,
        reason=f"reconciliation {ctx.run.public_id}: the provider shows the refund "
        f"{refund.get('status')}",
        provider_refund=refund,
    ):
        ctx.run.corrected += 1


def _refund_recorded(
    ctx: _Context, adjustment: Adjustment, refund: dict[str, Any], observation: Observation
) -> None:
    """A refund made outside Vouch that an applied adjustment recorded (unspent -> refunded on a
    funding leg): the provider's refund is on that leg's charge, for the amount recorded. One the
    provider shows failed or canceled that was not given back yet is released through the one
    release service (the one automatic correction; a dry run counts what it would release)."""
    funding = adjustment.funding_leg or (
        adjustment.refund_leg.funding_leg if adjustment.refund_leg is not None else None
    )
    if funding is None:
        return  # an adjustment recorded on no leg: nothing here counts it
    refund_id, status = str(refund["id"]), refund.get("status")
    vouch = {
        "refund": adjustment.provider_object_id,
        "charge": funding.charge_id,
        "amount": to_cents(adjustment.amount_micro),
        "status": "released" if adjustment.released_at else "recorded",
    }
    provider = {
        "refund": refund_id,
        "charge": _id(refund.get("charge")),
        "amount": refund.get("amount"),
        "status": status,
    }
    differing = _differing(vouch, provider, ("charge", "amount"))
    if differing:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.REFUND_MISMATCH,
                subject_type="refund",
                subject_id=refund_id,
                summary=f"Refund {refund_id}, recorded by adjustment {adjustment.public_id}, "
                "differs from what it recorded in " + ", ".join(differing),
                vouch_side=vouch,
                provider_side=provider,
                differing=differing,
                charge_id=funding.charge_id,
                envelope_public_id=funding.envelope.public_id,
                amount_micro=adjustment.amount_micro,
                observation=observation,
                escalate_as=("funding_leg", funding.public_id),
            ),
        )
    if status not in GONE or adjustment.released_at is not None:
        return
    if provider["charge"] != funding.charge_id:
        return  # not the refund recorded on that charge: the release service refuses it too
    if ctx.run.dry_run:
        charge = funding.charge_id
        ctx.would_release[charge] = ctx.would_release.get(charge, 0) + adjustment.amount_micro
        ctx.run.corrected += 1
        return
    if foreign_refund_release(provider_refund=refund, source=f"reconciliation {ctx.run.public_id}"):
        ctx.run.corrected += 1


def _refund_unrecorded(
    ctx: _Context,
    refund: dict[str, Any],
    named: RefundLeg | None,
    funding: FundingLeg | None,
    observation: Observation,
) -> None:
    """A provider refund on a Vouch charge that no leg records by id."""
    refund_id, status = str(refund["id"]), refund.get("status")
    name = _leg_named(refund)
    charge_id = _id(refund.get("charge"))
    provider = {
        "refund": refund_id,
        "charge": charge_id,
        "amount": refund.get("amount"),
        "vouch_leg": name,
        "status": status,
    }
    if named is not None:
        vouch, _ = _refund_sides(named, refund)
        envelope = named.operation.envelope.public_id
        if named.provider_refund_id:  # the leg records another refund: this one is a second
            if status in LIVE:
                _found(
                    ctx,
                    Finding(
                        code=DiscrepancyClass.REFUND_DUPLICATE,
                        subject_type="refund_leg",
                        subject_id=named.public_id,
                        summary=f"Two provider refunds carry leg {named.public_id}: "
                        f"{named.provider_refund_id} (recorded) and {refund_id}.",
                        vouch_side=vouch,
                        provider_side=provider,
                        differing=["refund"],
                        charge_id=charge_id,
                        envelope_public_id=envelope,
                        amount_micro=_micro(refund.get("amount")),
                        observation=observation,
                    ),
                )
        elif named.released and status in LIVE:  # refused or void (given back), yet live
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.REFUND_STATUS_DRIFT,
                    subject_type="refund_leg",
                    subject_id=named.public_id,
                    summary=f"Leg {named.public_id} is {named.outcome} and released here, but the "
                    f"provider holds refund {refund_id} for it, {status}.",
                    vouch_side=vouch,
                    provider_side=provider,
                    differing=["refund", "status"],
                    charge_id=charge_id,
                    envelope_public_id=envelope,
                    amount_micro=named.amount_micro,
                    observation=observation,
                ),
            )
        elif named.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN) and ctx.recent(
            named.reserved_at
        ):
            ctx.run.expected += 1  # its answer is being recorded
        # else: an open leg past its grace is named by the stuck phase (leg_stuck)
        return
    if name and ctx.recent(refund.get("created")):
        ctx.run.expected += 1  # Vouch's metadata, its leg not recorded yet
        # In flight: its charge may show it refunded already.
        amount = _micro(refund.get("amount"))
        ctx.in_flight[charge_id] = ctx.in_flight.get(charge_id, 0) + amount
        return
    if status not in LIVE or funding is None:
        return  # a failed foreign refund gave nothing back
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.REFUND_FOREIGN,
            subject_type="refund",
            subject_id=refund_id,
            summary=f"Refund {refund_id} of {refund.get('amount')} cents on charge "
            f"{provider['charge']} was made outside Vouch"
            + (f" (it names leg {name}, which Vouch does not have)." if name else "."),
            vouch_side={"refund": "", "charge": funding.charge_id, "amount": None, "vouch_leg": ""},
            provider_side=provider,
            differing=["refund", "amount"],
            charge_id=funding.charge_id,
            envelope_public_id=funding.envelope.public_id,
            amount_micro=_micro(refund.get("amount")),
            observation=observation,
            escalate_as=("funding_leg", funding.public_id),
        ),
    )


def _refund_leg_alone(ctx: _Context, leg: RefundLeg) -> Observation:
    """An accepted leg's refund read alone: compared, or missing at the provider."""
    outcome, observation = _read(ctx, "refund", leg.provider_refund_id)
    if outcome.accepted:
        _refunds(ctx, [outcome.require()], observation)
        return observation
    _count(ctx, "refund")
    vouch, _ = _refund_sides(leg, {})
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.REFUND_MISSING,
            subject_type="refund_leg",
            subject_id=leg.public_id,
            summary=f"Leg {leg.public_id} records refund {leg.provider_refund_id}; the provider "
            "has no such refund.",
            vouch_side=vouch,
            provider_side={
                "refund": "",
                "charge": "",
                "amount": None,
                "vouch_leg": "",
                "status": "",
            },
            differing=["refund", "amount", "status"],
            charge_id=leg.funding_leg.charge_id,
            envelope_public_id=leg.operation.envelope.public_id,
            amount_micro=leg.amount_micro,
            observation=observation,
        ),
    )
    return observation
