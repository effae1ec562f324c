"""Deadline reminders (SPEC §11): ops are told, by e-mail and by an escalation, when a dispute
that still has no filed response comes within 72 and then 24 hours of its deadline (`due_by`).

Each reminder is sent once: a row per dispute and window, under a unique constraint, is written
in the transaction that opens the escalation, so two workers (or two runs) racing for the same
reminder make one, and a rolled-back run sends nothing (the e-mails go after commit).

Only the tightest window reached is sent: a dispute first seen 10 hours before its deadline gets
the 24-hour reminder alone. A 72-hour reminder sent with a day left says less than the 24-hour
one and would only add noise. A dispute past its deadline gets none (nothing can be filed)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from core.services import audit_record
from disputes.models import DeadlineReminder, Dispute, FilingStatus, Packet, PacketKind
from verification.models import Escalation
from verification.services import escalation_open
from verification.subjects import Subject

logger = logging.getLogger("vouch.disputes")

REMINDER_VERDICT = "DEADLINE"
# A filing filed or under way answers the dispute: no reminder. A filing that was not proven
# (readback failed, nothing submitted) still needs a person before the deadline: reminded.
ANSWERED = (FilingStatus.FILED, FilingStatus.SUBMITTING, FilingStatus.AWAITING_READBACK)
RESPONDABLE = ("", "needs_response", "warning_needs_response")  # "": entered by staff, not read
# SPEC §17: the network's appeal stage has a deadline of its own (Stripe moves `due_by`), reminded
# in windows of its own ("appeal 24h") until an appeal is filed; the response's filing does not
# answer it.
APPEAL_STAGE = "appeal_needs_response"


def reminder_hours() -> list[int]:
    """The configured windows, tightest first (DISPUTES_REMINDER_HOURS, default 72 and 24)."""
    return sorted({int(h) for h in settings.DISPUTES_REMINDER_HOURS if int(h) > 0})


def disputes_awaiting_reminder(*, now: datetime) -> list[tuple[Dispute, int]]:
    """Each dispute due within the widest window, still open for a response and not answered by
    a filing, with the tightest window it has reached."""
    hours = reminder_hours()
    if not hours:
        return []
    answered = Packet.objects.filter(dispute=OuterRef("pk"), filing_status__in=ANSWERED)
    due = Dispute.objects.filter(
        (Q(provider_status__in=RESPONDABLE) & ~Exists(answered.filter(kind=PacketKind.RESPONSE)))
        | (Q(provider_status=APPEAL_STAGE) & ~Exists(answered.filter(kind=PacketKind.APPEAL))),
        response_deadline__gt=now,
        response_deadline__lte=now + timedelta(hours=hours[-1]),
    ).order_by("response_deadline", "pk")
    found = []
    for dispute in due:
        assert dispute.response_deadline is not None  # noqa: S101 - filtered above
        left = dispute.response_deadline - now
        window = next(h for h in hours if left <= timedelta(hours=h))
        found.append((dispute, window))
    return found


def deadline_reminders_send() -> list[DeadlineReminder]:
    """The scheduled job: for every dispute that reached a reminder window and has not had that
    window's reminder, record it (once: a unique constraint), open an escalation for ops (which
    e-mails the ops group's staff after commit) and e-mail DISPUTES_REMINDER_EMAILS. Each in its
    own transaction. Returns the reminders sent by this run."""
    now = timezone.now()
    sent = []
    for dispute, hours in disputes_awaiting_reminder(now=now):
        if DeadlineReminder.objects.filter(
            dispute=dispute, window=window_of(dispute, hours)
        ).exists():
            continue
        reminder = _remind(dispute=dispute, hours=hours, now=now)
        if reminder is not None:
            sent.append(reminder)
    if sent:
        logger.info(
            "deadline reminders sent: %s",
            ", ".join(f"{r.dispute.provider_dispute_id} ({r.window})" for r in sent),
        )
    return sent


def window_of(dispute: Dispute, hours: int) -> str:
    """A reminder's window: `24h` before the response's deadline, `appeal 24h` before the
    appeal's."""
    return f"appeal {hours}h" if dispute.provider_status == APPEAL_STAGE else f"{hours}h"


def _remind(*, dispute: Dispute, hours: int, now: datetime) -> DeadlineReminder | None:
    due_by = dispute.response_deadline
    assert due_by is not None  # noqa: S101 - only disputes with a deadline are reminded
    packet = Packet.objects.filter(dispute=dispute).order_by("-version").first()
    state = (
        f"its current packet is version {packet.version} ({packet.posture}, "
        f"{packet.get_status_display().lower()}, approval {packet.approval_status}, filing "
        f"{packet.filing_status.replace('_', ' ')})"
        if packet is not None
        else "it has no packet yet"
    )
    left_h = (due_by - now).total_seconds() / 3600
    appeal = dispute.provider_status == APPEAL_STAGE
    reason = (
        f"Dispute {dispute.provider_dispute_id} ({dispute.public_id}) on charge "
        f"{dispute.charge_id}, {_dollars(dispute.amount_micro)}, reason {dispute.reason}, must be "
        f"{'appealed' if appeal else 'answered'} by "
        f"{due_by.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')} "
        f"({left_h:.0f} h left; the {'appeal ' if appeal else ''}{hours} h reminder). "
        + (
            f"No appeal is filed: {state}. Prepare, approve and file an appeal in the admin "
            "(Disputes), or let the loss stand."
            if appeal
            else f"No response is filed: {state}. Review, approve and file it in the admin "
            "(Disputes), or accept the dispute."
        )
    )
    extra = [str(a) for a in settings.DISPUTES_REMINDER_EMAILS if str(a).strip()]
    with transaction.atomic():
        try:
            with transaction.atomic():
                reminder = DeadlineReminder.objects.create(
                    dispute=dispute, window=window_of(dispute, hours), due_by=due_by, sent_at=now
                )
        except IntegrityError:  # another worker sent it a moment ago
            return None
        escalation = escalation_open(
            verdict=REMINDER_VERDICT,
            verdict_class=f"dispute_{'appeal_' if appeal else ''}deadline_{hours}h",
            reason=reason,
            subject=Subject(type="dispute", id=dispute.public_id, money=False),
        )
        reminder.escalation = escalation
        reminder.recipients = sorted({*_notified(escalation), *extra})
        reminder.save(update_fields=["escalation", "recipients"])
        audit_record(
            actor=None,
            action="dispute.deadline_reminder",
            target_type="dispute",
            target_id=dispute.public_id,
            details={
                "window": reminder.window,
                "due_by": due_by.isoformat(),
                "escalation": escalation.pk,
                "recipients": reminder.recipients,
            },
        )
        if extra:
            subject = (
                f"[Vouch] Dispute {dispute.provider_dispute_id} due in {hours} h: no "
                f"{'appeal' if appeal else 'response'} filed"
            )
            transaction.on_commit(lambda: send_mail(subject[:200], reason, None, extra))
    reminder.dispute = dispute
    return reminder


def _dollars(micro: int) -> str:
    cents = micro // 10_000
    return f"${cents // 100:,}.{cents % 100:02d}"


def _notified(escalation: Escalation) -> list[str]:
    """Whom the escalation e-mailed: the ops group's staff."""
    latest = escalation.notifications.order_by("-created_at").first()
    return [str(r) for r in (latest.recipients if latest is not None else [])]
