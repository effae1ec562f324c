from datetime import timedelta

from verification import clock
from verification.models import Escalation, EscalationStatus, ProviderEvent


def events_unprocessed(*, older_than_s: float, limit: int = 500) -> list[int]:
    cutoff = clock.now() - timedelta(seconds=older_than_s)
    return list(
        ProviderEvent.objects.filter(processed_at__isnull=True, received_at__lt=cutoff)
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )


def escalated_subjects() -> dict[str, list[str]]:
    """The subjects a person is looking at now (an open escalation names them), by type."""
    subjects: dict[str, list[str]] = {}
    rows = (
        Escalation.objects.filter(status=EscalationStatus.OPEN)
        .exclude(subject_id="")
        .values_list("subject_type", "subject_id")
    )
    for subject_type, subject_id in rows:
        subjects.setdefault(subject_type, []).append(subject_id)
    return subjects
