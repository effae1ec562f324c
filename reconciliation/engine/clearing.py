"""The last phase: every open discrepancy the run did not see again is looked at once more,
alone; gone, it is cleared, citing the read that shows it gone."""

from __future__ import annotations

from envelopes.models import FundingLeg, LegOutcome, RefundLeg
from reconciliation.engine.charges import _charges, _funding_alone
from reconciliation.engine.disputes import _disputes
from reconciliation.engine.refunds import _refund_leg_alone, _refunds
from reconciliation.engine.shared import _Context, _ledger_observation, _read
from reconciliation.models import Discrepancy, DiscrepancyClass, Observation
from reconciliation.services import OPEN_STATES, discrepancy_clear

# Classes whose subject is found by the stuck and ledger phases, which look at everything (not
# only the window): not seen by a run means gone.
WHOLE_LEDGER = {
    DiscrepancyClass.LEG_STUCK,
    DiscrepancyClass.FUNDING_STUCK,
    DiscrepancyClass.RUN_OVERDUE,
    DiscrepancyClass.LEDGER_BREACH,
}


def _clear(ctx: _Context) -> None:
    """Every open discrepancy this run did not see: looked at once more, alone. Gone → cleared,
    citing the read that shows it gone; still there → seen again."""
    unseen = (
        Discrepancy.objects.filter(status__in=OPEN_STATES).exclude(last_run=ctx.run).order_by("id")
    )
    for discrepancy in unseen.iterator(chunk_size=200):
        observation = _look_again(ctx, discrepancy)
        discrepancy.refresh_from_db()
        if discrepancy.last_run_id != ctx.run.pk and discrepancy.is_open:
            discrepancy_clear(
                discrepancy=discrepancy,
                run=ctx.run,
                observation=observation,
                why=f"Not seen by run {ctx.run.public_id}.",
            )


def _look_again(ctx: _Context, discrepancy: Discrepancy) -> Observation | None:
    """Compare the discrepancy's subject alone, now; returns the observation it rests on (None:
    its subject is gone from the ledger, nothing to read)."""
    code, subject_type, subject_id = (
        discrepancy.code,
        discrepancy.subject_type,
        discrepancy.subject_id,
    )
    if code in WHOLE_LEDGER:
        # The stuck and ledger phases looked at the whole ledger: what they did not name is gone.
        return _ledger_observation(ctx, code, {"subject": subject_id, "found": False})
    if subject_type in ("refund", "dispute", "charge"):  # a provider object: read it
        return _compare_alone(ctx, subject_type, subject_id)
    if subject_type == "refund_leg":
        leg = (
            RefundLeg.objects.select_related("funding_leg", "operation__envelope")
            .filter(public_id=subject_id)
            .first()
        )
        if leg is None:
            return None
        if code == DiscrepancyClass.REFUND_MISSING:
            if leg.outcome == LegOutcome.ACCEPTED and not leg.released:
                return _refund_leg_alone(ctx, leg)
            return _ledger_observation(ctx, code, {"leg": leg.public_id, "released": True})
        # The refund it is about, as its provider side names it (a duplicate's: the second one).
        refund_id = discrepancy.provider_side.get("refund")
        return _compare_alone(ctx, "refund", str(refund_id)) if refund_id else None
    if subject_type == "funding_leg":
        funding = FundingLeg.objects.select_related("envelope").filter(public_id=subject_id).first()
        if funding is None:
            return None
        if code == DiscrepancyClass.CHARGE_MISSING:
            return _funding_alone(ctx, funding)
        return _compare_alone(ctx, "charge", funding.charge_id)
    return None


def _compare_alone(ctx: _Context, kind: str, object_id: str) -> Observation:
    """Read one provider object alone and compare it as a listing would have."""
    outcome, observation = _read(ctx, kind, object_id)
    if outcome.accepted:
        compare = {"refund": _refunds, "charge": _charges, "dispute": _disputes}[kind]
        compare(ctx, [outcome.require()], observation)
    return observation
