from datetime import datetime, timedelta

from django.conf import settings
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
    """Runs whose attempt (or a decided run's monitoring attempt) is queued or running: leased,
    and sent within the last VERIFICATION_IN_FLIGHT_WINDOW_S. Every claim leases a run for
    VERIFICATION_LEASE_S from its sending, so `leased_until` tells when it was sent. An attempt
    lost with a killed worker keeps its run leased (never claimed twice) for the whole lease, but
    gives its room back once the window has passed: the other due runs are not held up for
    minutes by attempts that will never end."""
    now = now or clock.now()
    lease_s = float(settings.VERIFICATION_LEASE_S)
    window_s = float(settings.VERIFICATION_IN_FLIGHT_WINDOW_S)
    sent_after = now + timedelta(seconds=max(lease_s - window_s, 0.0))
    return VerificationRun.objects.filter(leased_until__gt=sent_after).count()


def runs_due_waiting(*, now: datetime | None = None) -> bool:
    """Whether a pending run is due and not leased: a verdict waits for room. Monitoring a decided
    run yields to it (an event's monitoring is then left to the poll, which sends it into the
    room the due runs leave)."""
    now = now or clock.now()
    return (
        VerificationRun.objects.filter(verdict=Verdict.PENDING, next_attempt_at__lte=now)
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=now))
        .exists()
    )


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
