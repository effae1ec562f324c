"""Discrepancies and what people do with them (SPEC §15.4): recording what a run sees (one open
per class and subject, seen counts), clearing what a run no longer sees (citing the observation
that shows it gone), a person's acknowledgement or acceptance with a note, and the adjustment path
(proposed on the discrepancy by one person, approved by another through the one adjustment
service of `envelopes`). Every change of status goes through `core.transitions.transition`
against `models.DISCREPANCY_STATUS` (open -> acknowledged -> resolved; resolved is final), which
writes its audit event with its actor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from accounts.models import User
from core.exceptions import InvalidInput
from core.services import audit_record
from core.transitions import transition
from envelopes.adjustments import adjustment_propose
from envelopes.models import Adjustment as EnvelopeAdjustment
from envelopes.models import FundingLeg, RefundLeg
from reconciliation.models import (
    DISCREPANCY_STATUS,
    SEVERITY,
    TARGET,
    Discrepancy,
    DiscrepancyResolution,
    DiscrepancyStatus,
    Observation,
    Run,
    Severity,
)
from verification import clock
from verification.models import Escalation, EscalationStatus
from verification.services import escalation_clear, escalation_held_by, escalation_open
from verification.subjects import Subject

WORK_PERMISSION = "reconciliation.work_discrepancy"


@dataclass
class Finding:
    """One difference a run found: its class, its subject, both sides and the fields that
    differ, the money it concerns, and the provider data it was seen in."""

    code: str
    subject_type: str
    subject_id: str
    summary: str
    vouch_side: dict[str, Any] = field(default_factory=dict)
    provider_side: dict[str, Any] = field(default_factory=dict)
    differing: list[str] = field(default_factory=list)
    charge_id: str = ""
    envelope_public_id: str = ""
    amount_micro: int = 0
    observation: Observation | None = None
    # The leg an escalation (and an adjustment) is about, for money classes.
    escalate_as: tuple[str, str] | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.code, self.subject_type, self.subject_id)


def _bump(counts: dict[str, int], code: str) -> None:
    counts[code] = counts.get(code, 0) + 1


def discrepancy_record(*, run: Run, finding: Finding) -> tuple[Discrepancy, bool]:
    """Record what `run` saw: a new discrepancy (True), or the open one of that class and subject
    seen again (False: `last_seen_at`, `seen_count`, both sides and the observation updated).
    A new money discrepancy opens an escalation and notifies ops. Counts go to the run."""
    now = clock.now()
    existing = (
        Discrepancy.objects.unresolved()
        .filter(
            code=finding.code,
            subject_type=finding.subject_type,
            subject_id=finding.subject_id,
        )
        .order_by("id")
        .first()
    )
    if existing is not None and existing.last_run_id == run.pk:
        return existing, False  # this run recorded it already (a page read again on resume)
    if existing is not None:
        _seen_again(existing, run=run, finding=finding, now=now)
        _bump(run.seen, finding.code)
        return existing, False
    severity = SEVERITY[finding.code]
    try:
        with transaction.atomic():
            discrepancy = Discrepancy.objects.create(
                code=finding.code,
                severity=severity,
                subject_type=finding.subject_type,
                subject_id=finding.subject_id,
                charge_id=finding.charge_id,
                envelope_public_id=finding.envelope_public_id,
                amount_micro=finding.amount_micro,
                summary=finding.summary[:300],
                vouch_side=finding.vouch_side,
                provider_side=finding.provider_side,
                differing=finding.differing,
                first_seen_at=now,
                last_seen_at=now,
                due_at=now + TARGET[Severity(severity)],
                first_run=run,
                last_run=run,
                observation=finding.observation,
            )
    except IntegrityError:  # opened at the same moment by another run: it is seen again
        existing = Discrepancy.objects.unresolved().get(
            code=finding.code,
            subject_type=finding.subject_type,
            subject_id=finding.subject_id,
        )
        _seen_again(existing, run=run, finding=finding, now=now)
        _bump(run.seen, finding.code)
        return existing, False
    if severity == Severity.MONEY:
        subject_type, subject_id = finding.escalate_as or (finding.subject_type, finding.subject_id)
        escalation = escalation_open(
            verdict="DISCREPANCY",
            verdict_class=finding.code,
            reason=f"Reconciliation run {run.public_id}: {finding.summary}",
            subject=Subject(type=subject_type, id=subject_id, money=True),
        )
        discrepancy.escalation = escalation
        discrepancy.save(update_fields=["escalation"])
    audit_record(
        actor=None,
        action="discrepancy.open",
        target_type="discrepancy",
        target_id=discrepancy.public_id,
        details={
            "class": discrepancy.code,
            "subject": f"{discrepancy.subject_type}:{discrepancy.subject_id}",
            "run": run.public_id,
            "summary": discrepancy.summary,
        },
    )
    _bump(run.opened, finding.code)
    return discrepancy, True


def _seen_again(discrepancy: Discrepancy, *, run: Run, finding: Finding, now: Any) -> None:
    Discrepancy.objects.filter(pk=discrepancy.pk).update(
        last_seen_at=now,
        seen_count=F("seen_count") + 1,
        last_run=run,
        vouch_side=finding.vouch_side,
        provider_side=finding.provider_side,
        differing=finding.differing,
        summary=finding.summary[:300],
        amount_micro=finding.amount_micro,
        observation=finding.observation or discrepancy.observation,
    )
    discrepancy.refresh_from_db()


def discrepancy_clear(
    *, discrepancy: Discrepancy, run: Run, observation: Observation | None, why: str
) -> Discrepancy:
    """A run no longer sees it: resolved as `cleared`, citing the observation that shows it gone
    (None only for what the ledger alone shows, e.g. a stuck leg that has an answer now)."""
    with transaction.atomic():
        locked = Discrepancy.objects.select_for_update().get(pk=discrepancy.pk)
        if locked.status == DiscrepancyStatus.RESOLVED:
            return locked
        transition(
            locked,
            machine=DISCREPANCY_STATUS,
            to=DiscrepancyStatus.RESOLVED,
            actor=None,
            action="discrepancy.clear",
            also={
                "resolution": DiscrepancyResolution.CLEARED,
                "resolved_at": clock.now(),
                "cleared_by": observation,
                "note": why,
                "last_run": run,
            },
            details={
                "class": locked.code,
                "run": run.public_id,
                "observation": observation.pk if observation is not None else None,
                "sha256": observation.sha256 if observation is not None else None,
                "why": why,
            },
        )
        _bump(run.cleared, locked.code)
        _escalation_clear(locked, run=run, observation=observation)
    return locked


def _escalation_clear(
    discrepancy: Discrepancy, *, run: Run, observation: Observation | None
) -> None:
    """A money discrepancy that clears resolves its escalation, citing the clearing observation
    (SPEC §15.4) — unless another open discrepancy still rests on that escalation (one escalation
    per subject and class is shared): `verification.services.escalation_held_by`, the one rule
    the adjustment service's approval follows too. The discrepancy is resolved already here."""
    escalation = discrepancy.escalation
    if escalation is None or escalation_held_by(escalation):
        return  # another discrepancy still rests on it (the rule approving an adjustment uses)
    cited = (
        f"observation {observation.pk} (SHA-256 {observation.sha256})"
        if observation is not None
        else "the ledger alone (no provider observation)"
    )
    escalation_clear(
        escalation=escalation,
        note=f"Cleared by reconciliation run {run.public_id}: discrepancy {discrepancy.public_id} "
        f"({discrepancy.code}) is no longer seen, as {cited} shows.",
        details={
            "discrepancy": discrepancy.public_id,
            "class": discrepancy.code,
            "run": run.public_id,
            "observation": observation.pk if observation is not None else None,
            "sha256": observation.sha256 if observation is not None else None,
        },
    )


def discrepancies_resting_on(escalation: Escalation) -> list[str]:
    """The open (or acknowledged) discrepancies an escalation is shared by, by public id: what
    still rests on it (registered with `verification.services.escalation_holder_register` by
    `reconciliation.apps`). One whose adjustment is being approved is resolved first, in the
    approval's transaction (`discrepancies_on_adjustment_applied`), so it is not among them."""
    return list(
        Discrepancy.objects.unresolved()
        .filter(escalation=escalation)
        .order_by("id")
        .values_list("public_id", flat=True)
    )


def _require_work_permission(actor: User) -> None:
    if not actor.has_perm(WORK_PERMISSION):
        raise PermissionError(f"Working a discrepancy needs {WORK_PERMISSION}.")


def discrepancy_acknowledge(*, discrepancy: Discrepancy, actor: User) -> Discrepancy:
    """A person takes it: open → acknowledged."""
    _require_work_permission(actor)
    with transaction.atomic():
        locked = Discrepancy.objects.select_for_update().get(pk=discrepancy.pk)
        if not DISCREPANCY_STATUS.can(locked.status, DiscrepancyStatus.ACKNOWLEDGED):
            raise InvalidInput(f"This discrepancy is {locked.status}: only an open one is taken.")
        transition(
            locked,
            machine=DISCREPANCY_STATUS,
            to=DiscrepancyStatus.ACKNOWLEDGED,
            actor=actor,
            action="discrepancy.acknowledge",
            also={"acknowledged_at": clock.now(), "acknowledged_by": actor},
            details={"class": locked.code},
        )
    return locked


def discrepancy_accept(*, discrepancy: Discrepancy, actor: User, note: str) -> Discrepancy:
    """A person accepts the difference as it stands, with a note. Refused for money: a money
    discrepancy is resolved by an adjustment a second person approves (or clears by itself)."""
    _require_work_permission(actor)
    note = (note or "").strip()
    if not note:
        raise InvalidInput("Say why: accepting a discrepancy needs a note.", details={"note": []})
    with transaction.atomic():
        locked = Discrepancy.objects.select_for_update().get(pk=discrepancy.pk)
        if locked.status == DiscrepancyStatus.RESOLVED:
            raise InvalidInput("This discrepancy is resolved already.")
        if locked.severity == Severity.MONEY:
            raise InvalidInput(
                "This discrepancy concerns money: propose an adjustment, which a second person "
                "with reconciliation.approve_adjustment approves."
            )
        transition(
            locked,
            machine=DISCREPANCY_STATUS,
            to=DiscrepancyStatus.RESOLVED,
            actor=actor,
            action="discrepancy.accept",
            also={
                "resolution": DiscrepancyResolution.ACCEPTED,
                "resolved_at": clock.now(),
                "resolved_by": actor,
                "note": note,
            },
            details={"class": locked.code, "note": note},
        )
    return locked


def discrepancy_legs(discrepancy: Discrepancy) -> tuple[RefundLeg | None, FundingLeg | None]:
    """The refund leg and funding leg an adjustment of this discrepancy would correct."""
    subject_type, subject_id = discrepancy.subject_type, discrepancy.subject_id
    if discrepancy.escalation is not None and discrepancy.escalation.subject_type:
        subject_type = discrepancy.escalation.subject_type
        subject_id = discrepancy.escalation.subject_id
    if subject_type == "refund_leg":
        leg = RefundLeg.objects.select_related("funding_leg").filter(public_id=subject_id).first()
        return leg, leg.funding_leg if leg is not None else None
    if subject_type == "funding_leg":
        return None, FundingLeg.objects.filter(public_id=subject_id).first()
    return None, None


def discrepancy_adjustment_propose(
    *, discrepancy: Discrepancy, actor: User, kind: str, reason: str, provider_object_id: str = ""
) -> EnvelopeAdjustment:
    """Propose a correcting adjustment on the discrepancy (through the one adjustment service,
    which checks the permission, the kind and the provider object). A second person approves it;
    the approval resolves the discrepancy as `adjusted`."""
    if discrepancy.status == DiscrepancyStatus.RESOLVED:
        raise InvalidInput("This discrepancy is resolved already.")
    refund_leg, funding_leg = discrepancy_legs(discrepancy)
    if refund_leg is None and funding_leg is None:
        raise InvalidInput(
            "This discrepancy names no leg to correct: accept it with a note, or let a run "
            "clear it."
        )
    escalation = discrepancy.escalation
    adjustment = adjustment_propose(
        actor=actor,
        kind=kind,
        reason=reason,
        escalation=escalation
        if escalation is not None and escalation.status == EscalationStatus.OPEN
        else None,
        refund_leg=refund_leg,
        funding_leg=funding_leg,
        provider_object_id=provider_object_id,
    )
    with transaction.atomic():
        Discrepancy.objects.filter(pk=discrepancy.pk).update(adjustment=adjustment)
        audit_record(
            actor=actor,
            action="discrepancy.propose_adjustment",
            target_type="discrepancy",
            target_id=discrepancy.public_id,
            details={"adjustment": adjustment.public_id, "kind": kind},
        )
    return adjustment


def discrepancies_on_adjustment_applied(*, adjustment: EnvelopeAdjustment) -> int:
    """The adjustment-applied listener's service: the discrepancies it answers are resolved as
    `adjusted` by its approver (inside the approval's transaction)."""
    found = Discrepancy.objects.unresolved().select_for_update().filter(adjustment=adjustment)
    count = 0
    for discrepancy in found:
        transition(
            discrepancy,
            machine=DISCREPANCY_STATUS,
            to=DiscrepancyStatus.RESOLVED,
            actor=adjustment.decided_by,
            action="discrepancy.adjusted",
            also={
                "resolution": DiscrepancyResolution.ADJUSTED,
                "resolved_at": clock.now(),
                "resolved_by": adjustment.decided_by,
                "note": f"Adjusted by {adjustment.public_id} ({adjustment.kind}).",
            },
            details={"class": discrepancy.code, "adjustment": adjustment.public_id},
        )
        count += 1
    return count
