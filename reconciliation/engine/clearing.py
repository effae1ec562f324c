"""The last phase: every open discrepancy the run did not see again is looked at once more,
alone; gone, it is cleared, citing the read that shows it gone."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from envelopes.models import FundingLeg, LegOutcome, RefundLeg
from reconciliation.classes import CLASSES, LookAgain
from reconciliation.engine.charges import _charges, _funding_alone
from reconciliation.engine.disputes import _disputes
from reconciliation.engine.refunds import _refund_leg_alone, _refunds
from reconciliation.engine.shared import _Context, _ledger_observation, _read
from reconciliation.models import Discrepancy, Observation
from reconciliation.services import discrepancy_clear

PROVIDER_OBJECTS = ("refund", "dispute", "charge")  # subject types read from the provider as is


def _clear(ctx: _Context) -> None:
    """Every open discrepancy this run did not see: looked at once more, alone. Gone → cleared,
    citing the read that shows it gone; still there → seen again."""
    unseen = Discrepancy.objects.unresolved().exclude(last_run=ctx.run).order_by("id")
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
    """Compare the discrepancy's subject alone, now, the way its class's registry entry says
    (`reconciliation.classes`); returns the observation it rests on (None: its subject is gone
    from the ledger, nothing to read). A row of a class the registry no longer has is compared."""
    spec = CLASSES.get(discrepancy.code)
    how = spec.look_again if spec is not None else LookAgain.COMPARE
    return LOOK_AGAIN[how](ctx, discrepancy)


def _gone_from_ledger(ctx: _Context, discrepancy: Discrepancy) -> Observation | None:
    """The stuck and ledger phases looked at the whole ledger: what they did not name is gone."""
    return _ledger_observation(
        ctx, discrepancy.code, {"subject": discrepancy.subject_id, "found": False}
    )


def _compared_again(ctx: _Context, discrepancy: Discrepancy) -> Observation | None:
    """Its subject's provider object read alone and compared: the object itself, a refund leg's
    refund as the provider side names it (a duplicate's: the second one), a funding leg's
    charge."""
    subject_type, subject_id = discrepancy.subject_type, discrepancy.subject_id
    if subject_type in PROVIDER_OBJECTS:  # a provider object: read it
        return _compare_alone(ctx, subject_type, subject_id)
    if subject_type == "refund_leg":
        if _refund_leg(subject_id) is None:
            return None
        refund_id = discrepancy.provider_side.get("refund")
        return _compare_alone(ctx, "refund", str(refund_id)) if refund_id else None
    if subject_type == "funding_leg":
        funding = _funding_leg(subject_id)
        return None if funding is None else _compare_alone(ctx, "charge", funding.charge_id)
    return None


def _read_again(ctx: _Context, discrepancy: Discrepancy) -> Observation | None:
    """What a leg records and the provider did not have, read alone again: still missing, or
    back (compared). A refund leg released since rests on the ledger alone."""
    subject_type, subject_id = discrepancy.subject_type, discrepancy.subject_id
    if subject_type == "refund_leg":
        leg = _refund_leg(subject_id)
        if leg is None:
            return None
        if leg.outcome == LegOutcome.ACCEPTED and not leg.released:
            return _refund_leg_alone(ctx, leg)
        return _ledger_observation(ctx, discrepancy.code, {"leg": leg.public_id, "released": True})
    if subject_type == "funding_leg":
        funding = _funding_leg(subject_id)
        return None if funding is None else _funding_alone(ctx, funding)
    return _compared_again(ctx, discrepancy)


# The look-again dispatch: one function per way a registry entry may name.
LOOK_AGAIN: dict[LookAgain, Callable[[_Context, Discrepancy], Observation | None]] = {
    LookAgain.COMPARE: _compared_again,
    LookAgain.READ_AGAIN: _read_again,
    LookAgain.LEDGER: _gone_from_ledger,
}
if missing := sorted(set(LookAgain) - set(LOOK_AGAIN)):
    raise ImproperlyConfigured(f"reconciliation.engine.clearing: no look-again for {missing}")


def _refund_leg(public_id: str) -> RefundLeg | None:
    return (
        RefundLeg.objects.select_related("funding_leg", "operation__envelope")
        .filter(public_id=public_id)
        .first()
    )


def _funding_leg(public_id: str) -> FundingLeg | None:
    return FundingLeg.objects.select_related("envelope").filter(public_id=public_id).first()


def _compare_alone(ctx: _Context, kind: str, object_id: str) -> Observation:
    """Read one provider object alone and compare it as a listing would have."""
    outcome, observation = _read(ctx, kind, object_id)
    if outcome.accepted:
        compare = {"refund": _refunds, "charge": _charges, "dispute": _disputes}[kind]
        compare(ctx, [outcome.require()], observation)
    return observation
