"""Escalations: opened for a person (a notification, an e-mail to ops after commit, an audit
event), resolved by a person's note or an approved adjustment, or cleared by reconciliation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from accounts.models import User
from core.services import audit_record
from verification import clock
from verification.models import (
    Escalation,
    EscalationStatus,
    Notification,
    Resolution,
    VerificationRun,
)
from verification.subjects import Subject, subject_of

OPS_GROUP = "ops"

# What still rests on an escalation, told by the apps that hang things on one (the engine knows no
# domain): each holder answers, for an escalation, the names of what of its own is still open
# under it — e.g. reconciliation's open discrepancies (one escalation per subject and class is
# shared by every discrepancy of that class on that subject).
Holder = Callable[[Escalation], list[str]]
_HOLDERS: list[Holder] = []


def escalation_holder_register(holder: Holder) -> None:
    if holder not in _HOLDERS:
        _HOLDERS.append(holder)


def escalation_held_by(escalation: Escalation) -> list[str]:
    """The one rule (SPEC §15.4, issue 37 item 5) of whether an escalation may be resolved by what
    closed one of the things under it — a discrepancy a run cleared, an adjustment a second person
    approved: only when nothing else still rests on it. Returns what still does (empty: nothing),
    as every registered holder names it. The caller closes its own thing first, in the same
    transaction, so that it is not counted."""
    return [name for holder in _HOLDERS for name in holder(escalation)]


class EscalationNeedsAdjustment(ValueError):
    """A money escalation is resolved by an adjustment a second person approves, not by a note."""


def escalation_open(
    *,
    run: VerificationRun | None = None,
    verdict: str,
    verdict_class: str | None,
    reason: str,
    subject: Subject | None = None,
) -> Escalation:
    """Open an escalation for a person, with a notification record and an email to the ops group
    (sent after commit), and an audit event. Its subject is given, or told by the app that started
    the run (`verification.subjects`). One open escalation per subject and class: opening it again
    returns the open one, with no second notification."""
    if subject is None and run is not None:
        subject = subject_of(run)
    fields = {
        "subject_type": subject.type if subject else "",
        "subject_id": subject.id if subject else "",
        "money": bool(subject and subject.money),
    }
    if subject is not None:
        existing = (
            Escalation.objects.open()
            .filter(
                subject_type=subject.type,
                subject_id=subject.id,
                verdict_class=verdict_class or "",
            )
            .first()
        )
        if existing is not None:
            return existing
    try:
        with transaction.atomic():
            escalation = Escalation.objects.create(
                run=run, verdict=verdict, verdict_class=verdict_class or "", reason=reason, **fields
            )
    except IntegrityError:  # opened concurrently by another observer of the same subject
        return Escalation.objects.open().get(
            subject_type=fields["subject_type"],
            subject_id=fields["subject_id"],
            verdict_class=verdict_class or "",
        )
    recipients = sorted(
        User.objects.filter(groups__name=OPS_GROUP, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )
    labelled = f"{verdict}{f' ({verdict_class})' if verdict_class else ''}"
    if run is not None:
        title = f"{run.contract_id} {run.operation_id}"
        opening = (
            f"Run {run.public_id} ({run.contract_id} v{run.contract_version}) on operation "
            f"{run.operation_id} is {labelled}."
        )
    else:
        title = escalation.subject_label
        opening = f"{escalation.subject_label} is {labelled}."
    if escalation.money:
        opening += " It concerns money: resolve it by an adjustment that a second person approves."
    body = f"{opening}\n\n{reason}\n\nOpen the escalation queue in the admin to resolve it."
    notification = Notification.objects.create(
        escalation=escalation,
        recipients=recipients,
        subject=f"[Vouch] {verdict} {verdict_class or ''}: {title}".replace("  ", " ")[:200],
        body=body,
    )
    audit_record(
        actor=None,
        action="escalation.open",
        target_type="verification_run" if run is not None else escalation.subject_type,
        target_id=run.public_id if run is not None else escalation.subject_id,
        details={
            "escalation": escalation.pk,
            "verdict": verdict,
            "class": verdict_class or "",
            "reason": reason,
            "subject": escalation.subject_label,
            "money": escalation.money,
        },
    )
    if recipients:
        transaction.on_commit(lambda: _send(notification.pk))
    return escalation


def _send(notification_id: int) -> None:
    notification = Notification.objects.get(pk=notification_id)
    send_mail(notification.subject, notification.body, None, notification.recipients)
    Notification.objects.filter(pk=notification_id).update(sent_at=clock.now())


@transaction.atomic
def escalation_resolve(
    *, escalation: Escalation, actor: User, note: str, adjustment: str | None = None
) -> Escalation:
    """A person's resolution. With a note only, for an escalation that concerns no money: refused
    if already resolved, if the note is empty, if the person lacks
    `verification.resolve_escalation`, or if it concerns money (EscalationNeedsAdjustment). With
    `adjustment` (the public id of the approved adjustment that corrected the ledger, called by
    the adjustment service in its own transaction): resolved as `adjusted` by its approver."""
    if adjustment is None and not actor.has_perm("verification.resolve_escalation"):
        raise PermissionError("resolving an escalation needs verification.resolve_escalation")
    note = note.strip()
    if not note:
        raise ValueError("a resolution needs a note")
    locked = Escalation.objects.select_for_update().get(pk=escalation.pk)
    if locked.status != EscalationStatus.OPEN:
        raise ValueError("this escalation is already resolved")
    if locked.money and adjustment is None:
        raise EscalationNeedsAdjustment(
            "this escalation concerns money: propose an adjustment, which a second person with "
            "reconciliation.approve_adjustment approves"
        )
    locked.status = EscalationStatus.RESOLVED
    locked.resolved_at = clock.now()
    locked.resolved_by = actor
    locked.resolution = Resolution.ADJUSTED if adjustment else Resolution.NOTE
    locked.resolution_note = note
    locked.save(
        update_fields=["status", "resolved_at", "resolved_by", "resolution", "resolution_note"]
    )
    audit_record(
        actor=actor,
        action="escalation.resolve",
        target_type="escalation",
        target_id=str(locked.pk),
        details={
            "run": locked.run.public_id if locked.run is not None else None,
            "subject": locked.subject_label,
            "verdict": locked.verdict,
            "resolution": locked.resolution,
            "adjustment": adjustment,
            "note": note,
        },
    )
    return locked


def escalation_clear(*, escalation: Escalation, note: str, details: dict[str, Any]) -> bool:
    """No person: reconciliation saw the difference this escalation was opened for gone (SPEC
    §15.4: a money discrepancy that clears resolves its escalation, citing the clearing
    observation, which `note` and `details` name). Called in the caller's transaction. Returns
    whether it resolved it (False: resolved already)."""
    locked = Escalation.objects.select_for_update().get(pk=escalation.pk)
    if locked.status != EscalationStatus.OPEN:
        return False
    locked.status = EscalationStatus.RESOLVED
    locked.resolved_at = clock.now()
    locked.resolution = Resolution.CLEARED
    locked.resolution_note = note
    locked.save(update_fields=["status", "resolved_at", "resolution", "resolution_note"])
    audit_record(
        actor=None,
        action="escalation.clear",
        target_type="escalation",
        target_id=str(locked.pk),
        details={"subject": locked.subject_label, "verdict": locked.verdict, **details},
    )
    return True
