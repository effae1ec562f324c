"""Thin Celery tasks: they take ids and call services."""

import logging
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from verification import clock, selectors, services

logger = logging.getLogger("vouch.verification")
# How often `verification.poll` says how many runs are pending, whichever worker runs it.
PENDING_LOG_EVERY_S = 60


def _enqueue(run_id: int, token: str, trigger: str) -> None:
    attempt.delay(run_id, token, trigger)


def _send_due() -> int:
    """Send an attempt for each due run the workers have room for (bounded: at most
    VERIFICATION_IN_FLIGHT_MAX in flight, VERIFICATION_BATCH_SIZE at a time)."""
    claimed = services.runs_claim_within(
        in_flight_max=settings.VERIFICATION_IN_FLIGHT_MAX, limit=settings.VERIFICATION_BATCH_SIZE
    )
    for run_id, token in claimed:
        attempt.delay(run_id, token, "poll")
    return len(claimed)


@shared_task(name="verification.poll")
def poll() -> int:
    """Send the due runs' attempts the workers have room for, and the due monitoring attempts."""
    sent = _send_due()
    monitored = services.runs_claim_monitor_due(limit=settings.VERIFICATION_BATCH_SIZE)
    for run_id in monitored:
        attempt.delay(run_id, "", "monitor")
    _pending_log_once_a_minute()
    # The run's own line (ops/logs.py) is written only when this is not 0: an idle tick is quiet.
    return sent + len(monitored)


def pending_log_key(now: datetime) -> str:
    """The cache key that the first tick of `now`'s minute claims."""
    return f"verification.poll:pending-logged:{int(now.timestamp()) // PENDING_LOG_EVERY_S}"


def _pending_log_once_a_minute() -> None:
    """One line a minute with the number of pending runs, across every worker process: the first
    tick of each minute of the clock claims that minute in the shared cache (an atomic `add`)."""
    if cache.add(pending_log_key(clock.now()), 1, PENDING_LOG_EVERY_S * 2):
        pending = selectors.runs_pending_count()
        logger.info("verification runs pending: %d", pending, extra={"pending": pending})


@shared_task(name="verification.attempt")
def attempt(run_id: int, token: str, trigger: str) -> None:
    """One attempt; then its room goes to the next due run at once, not at the next tick (so a
    run due under load waits for a worker, not for the poll)."""
    services.run_attempt(run_id=run_id, token=token, trigger=trigger, enqueue=_enqueue)
    _send_due()


@shared_task(name="verification.process_event")
def process_event(event_pk: int) -> None:
    services.provider_event_process(event_pk=event_pk, enqueue=_enqueue)


@shared_task(name="verification.retry_events")
def retry_events() -> int:
    """Process again the stored events whose processing did not finish: a lost task, a crash, or
    a failed attempt whose backoff has run out (bounded: VERIFICATION_EVENT_MAX_ATTEMPTS)."""
    pending = selectors.events_unprocessed(
        older_than_s=settings.VERIFICATION_EVENT_RETRY_AFTER_S,
        limit=settings.VERIFICATION_BATCH_SIZE,
    )
    for event_pk in pending:
        process_event.delay(event_pk)
    return len(pending)


@shared_task(name="verification.prune_events")
def prune_events() -> int:
    return services.provider_events_prune(older_than_days=settings.VERIFICATION_EVENT_KEEP_DAYS)
