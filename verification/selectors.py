from datetime import datetime, timedelta

from django.db.models import Q

from verification import clock
from verification.models import (
    Escalation,
    ProviderEvent,
    Verdict,
    VerificationRun,
)


def events_unprocessed(*, older_than_s: float, limit: int = 500) -> list[int]:
    """Stored events to process again, oldest first: those never attempted that arrived more than
    `older_than_s` ago (their task was lost), and those whose failed attempt's backoff has run
    out (`next_attempt_at` passed). Given-up events are processed (`processed_at` set): never."""
    now = clock.now()
    cutoff = now - timedelta(seconds=older_than_s)
    return list(
        ProviderEvent.objects.filter(processed_at__isnull=True)
        .filter(
            Q(next_attempt_at__isnull=True, received_at__lt=cutoff) | Q(next_attempt_at__lte=now)
        )
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )


def runs_in_flight(*, now: datetime | None = None) -> int:
    """Runs leased now: an attempt (or a decided run's monitoring attempt) of each is queued or
    running, sent by the poll or by an event, or its worker died and the lease has not run out."""
    return VerificationRun.objects.filter(leased_until__gt=now or clock.now()).count()


def runs_pending_count() -> int:
    """How many verification runs have no verdict yet."""
    return VerificationRun.objects.filter(verdict=Verdict.PENDING).count()


def escalated_subjects() -> dict[str, list[str]]:
    """The subjects a person is looking at now (an open escalation names them), by type."""
    subjects: dict[str, list[str]] = {}
    rows = (
        Escalation.objects.open().exclude(subject_id="").values_list("subject_type", "subject_id")
    )
    for subject_type, subject_id in rows:
        subjects.setdefault(subject_type, []).append(subject_id)
    return subjects
