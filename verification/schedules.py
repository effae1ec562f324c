from django.conf import settings

from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="verification: poll due runs",
        task="verification.poll",
        every_seconds=settings.VERIFICATION_POLL_EVERY_S,
        description="Claims due verification runs (SKIP LOCKED) and attempts each.",
    ),
    Schedule(
        name="verification: retry unprocessed provider events",
        task="verification.retry_events",
        every_seconds=60,
        description="Processes again stored webhook events whose processing did not finish, "
        "with backoff, at most VERIFICATION_EVENT_MAX_ATTEMPTS times.",
    ),
    Schedule(
        name="verification: prune provider events",
        task="verification.prune_events",
        every_seconds=24 * 60 * 60,
        description="Deletes processed webhook events older than VERIFICATION_EVENT_KEEP_DAYS.",
    ),
]
