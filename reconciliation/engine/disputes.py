"""Provider disputes on Vouch charges compared with Vouch's records of them
(dispute_unrecorded, dispute_status_drift), with the packets filed for them (filing_unconfirmed)
and with the money the ledger moved for them (dispute_funds_mismatch, SPEC §18: what Stripe's
balance transactions for the dispute withdrew and reinstated against what the dispute's funds row
recorded; a balance transaction younger than the grace period is in flight, its event on its
way)."""

from __future__ import annotations

from typing import Any

from disputes.models import Dispute, FilingStatus, Packet
from envelopes.models import DisputeFunds, FundingLeg
from envelopes.money import to_cents
from envelopes.services import dispute_moved
from reconciliation.engine.shared import _Context, _count, _found, _id, _submissions
from reconciliation.models import DiscrepancyClass, Observation
from reconciliation.services import Finding


def _disputes(ctx: _Context, disputes: list[dict[str, Any]], observation: Observation) -> list[str]:
    ids = [str(d["id"]) for d in disputes]
    rows = {d.provider_dispute_id: d for d in Dispute.objects.filter(provider_dispute_id__in=ids)}
    charges = {_id(d.get("charge")) for d in disputes}
    ours = set(FundingLeg.objects.filter(charge_id__in=charges).values_list("charge_id", flat=True))
    filed = set(
        Packet.objects.filter(
            dispute__provider_dispute_id__in=ids, filing_status=FilingStatus.FILED
        ).values_list("dispute__provider_dispute_id", flat=True)
    )
    funds = {
        f.provider_dispute_id: f for f in DisputeFunds.objects.filter(provider_dispute_id__in=ids)
    }
    seen = []
    for dispute in disputes:
        dispute_id, charge_id = str(dispute["id"]), _id(dispute.get("charge"))
        row = rows.get(dispute_id)
        if row is None and charge_id not in ours:
            continue
        _count(ctx, "dispute")
        seen.append(dispute_id)
        provider = {
            "dispute": dispute_id,
            "charge": charge_id,
            "status": dispute.get("status"),
            "amount": dispute.get("amount"),
            "submissions": _submissions(dispute),
        }
        if row is None:
            # Unrecorded: the money it moved is recorded with it (SPEC §18), by its event or the
            # person who enters it; `dispute_unrecorded` says so, once.
            if ctx.recent(dispute.get("created")):
                ctx.run.expected += 1  # its webhook may be on its way
                continue
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.DISPUTE_UNRECORDED,
                    subject_type="dispute",
                    subject_id=dispute_id,
                    summary=f"The provider has dispute {dispute_id} on charge {charge_id}; "
                    "Vouch has no record of it.",
                    vouch_side={"dispute": "", "charge": charge_id, "status": ""},
                    provider_side=provider,
                    differing=["dispute", "status"],
                    charge_id=charge_id,
                    observation=observation,
                ),
            )
            continue
        vouch = {
            "dispute": row.provider_dispute_id,
            "charge": row.charge_id,
            "status": row.provider_status,
            "amount": to_cents(row.amount_micro),
            "submissions": "filed" if dispute_id in filed else "",
        }
        _funds_compare(ctx, dispute, funds.get(dispute_id), observation)
        if row.provider_status != dispute.get("status"):
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.DISPUTE_STATUS_DRIFT,
                    subject_type="dispute",
                    subject_id=dispute_id,
                    summary=f"Dispute {dispute_id} is {dispute.get('status')} at the provider, "
                    f"{row.provider_status or '(no status)'} here.",
                    vouch_side=vouch,
                    provider_side=provider,
                    differing=["status"],
                    charge_id=row.charge_id,
                    observation=observation,
                ),
            )
        if dispute_id in filed and not provider["submissions"]:
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.FILING_UNCONFIRMED,
                    subject_type="dispute",
                    subject_id=dispute_id,
                    summary=f"Vouch shows a filed packet for dispute {dispute_id}; the provider "
                    "shows no evidence submission.",
                    vouch_side=vouch,
                    provider_side=provider,
                    differing=["submissions"],
                    charge_id=row.charge_id,
                    observation=observation,
                ),
            )
    return seen


def _funds_compare(
    ctx: _Context,
    dispute: dict[str, Any],
    funds: DisputeFunds | None,
    observation: Observation,
) -> None:
    """What Stripe withdrew and reinstated for the dispute against what the ledger recorded."""
    moved = dispute_moved(dispute)
    dispute_id, charge_id = str(dispute["id"]), _id(dispute.get("charge"))
    recorded = (
        (to_cents(funds.withdrawn_micro), to_cents(funds.reinstated_micro))
        if funds is not None
        else (0, 0)
    )
    provider: dict[str, Any] = {
        "dispute": dispute_id,
        "charge": charge_id,
        "withdrawn": moved.withdrawn,
        "reinstated": moved.reinstated,
    }
    vouch: dict[str, Any] = {
        "dispute": funds.provider_dispute_id if funds else "",
        "charge": funds.charge_id if funds else "",
        "withdrawn": recorded[0],
        "reinstated": recorded[1],
    }
    differing = [name for name in ("withdrawn", "reinstated") if vouch[name] != provider[name]]
    if not differing:
        return
    created = [
        int(txn["created"])
        for txn in dispute.get("balance_transactions") or ()
        if isinstance(txn, dict) and txn.get("created") is not None
    ]
    if created and ctx.recent(max(created)):
        ctx.run.expected += 1  # the money moved moments ago: its event is on its way
        return
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.DISPUTE_FUNDS_MISMATCH,
            subject_type="dispute",
            subject_id=dispute_id,
            summary=f"For dispute {dispute_id} Stripe withdrew {moved.withdrawn} and "
            f"reinstated {moved.reinstated} cents; the ledger recorded {recorded[0]} "
            f"and {recorded[1]}.",
            vouch_side=vouch,
            provider_side=provider,
            differing=differing,
            charge_id=charge_id,
            amount_micro=abs((moved.withdrawn - moved.reinstated) - (recorded[0] - recorded[1]))
            * 10_000,
            observation=observation,
        ),
    )
