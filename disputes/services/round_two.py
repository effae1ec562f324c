"""What SPEC §17 adds to a response version when it is prepared: the enhanced evidence Vouch's own
receipts qualify it for (Visa Compelling Evidence 3.0, `disputes.ce3`), a Visa or Mastercard
compliance dispute's fee acknowledgement, and the cost of accepting against contesting
(`disputes.fees`, with the merchant's own record for the reason from `disputes.outcomes`). Reads
only; the digest binds what they return."""

from __future__ import annotations

from typing import Any

from disputes.ce3 import ce3_evidence, ce3_qualification
from disputes.drafting import ReceiptFact
from disputes.fees import posture_costs
from disputes.models import Dispute
from disputes.outcomes import win_record
from disputes.packets import CE3, compliance_program
from receipts.models import Receipt


def enhanced_for(dispute: Dispute) -> dict[str, Any]:
    """The enhanced evidence programs the provider says the dispute is eligible for, each with
    what Vouch can show: CE 3.0's qualification from receipts (and Stripe's payload when
    qualified), or the network's compliance fee (Visa's or Mastercard's) the approver must
    acknowledge."""
    eligible = set(dispute.enhanced_eligibility_types or [])
    out: dict[str, Any] = {}
    if CE3 in eligible:
        result = ce3_qualification(dispute=dispute)
        out[CE3] = {**result.as_dict(), "evidence": ce3_evidence(result)}
    if (program := compliance_program(dispute)) is not None:
        out[program] = {"fee_acknowledgement": "required from the approver"}
    return out


def ce3_prior_facts(dispute: Dispute) -> list[ReceiptFact]:
    """The receipts of the two prior charges that qualify the dispute for Visa CE 3.0, as a
    drafter sees receipts; empty unless the provider says it is eligible and it qualifies."""
    if CE3 not in (dispute.enhanced_eligibility_types or []):
        return []
    result = ce3_qualification(dispute=dispute)
    if result.status != "qualified":
        return []
    ids = [prior.receipt.receipt_id for prior in result.priors]
    rows = {r.id: r for r in Receipt.objects.filter(id__in=ids)}
    return [
        ReceiptFact(
            id=rows[rid].id,
            kind=rows[rid].kind,
            amount_micro=int(rows[rid].amount_micro),
            provider_object_id=rows[rid].provider_object_id,
            detail=dict((rows[rid].body or {}).get("detail") or {}),
        )
        for rid in ids
        if rid in rows
    ]


def costs_for(dispute: Dispute) -> dict[str, Any]:
    """The amount at stake, the fees and the outcome of accepting against contesting."""
    return posture_costs(
        amount_micro=dispute.amount_micro,
        currency=dispute.currency,
        compliance=compliance_program(dispute),
        own_record=win_record(dispute.reason),
    )
