"""Thin Celery tasks: they take ids and call services."""

import logging
import time
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from core import ticks
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
    monitored = services.runs_claim_monitor_within(
        in_flight_max=settings.VERIFICATION_IN_FLIGHT_MAX, limit=settings.VERIFICATION_BATCH_SIZE
    )
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
    """One stored event (a message sent before the events' drain existed, or by hand)."""
    services.provider_event_process(event_pk=event_pk, enqueue=_enqueue)


# The slot of the events' drain (core.ticks): at most one queued or running.
EVENTS_SLOT = "verification: process stored events"


def process_events_soon() -> None:
    """Have the stored events processed: send the drain, unless one is queued or running (it
    sees every event committed before it frees its slot, and looks once more after)."""
    claim = ticks.tick_claim(EVENTS_SLOT, every_s=0)
    if claim is None:
        return
    try:
        process_events.apply_async(headers=claim.headers())
    except BaseException:
        ticks.tick_done(claim)
        raise


def _events_left() -> None:
    """After the drain freed its slot: an event stored meanwhile gets a drain of its own."""
    if selectors.events_unprocessed(older_than_s=0, limit=1):
        process_events_soon()


@shared_task(name="verification.process_events")
def process_events() -> int:
    """The events' drain: the stored events not processed yet (and failed ones whose backoff ran
    out), oldest first, in batches, for at most VERIFICATION_EVENT_DRAIN_S; one webhook is one
    row, not one task, so a burst of deliveries never fills the queue (SPEC §11)."""
    done = 0
    deadline = time.monotonic() + settings.VERIFICATION_EVENT_DRAIN_S
    while time.monotonic() < deadline:
        batch = selectors.events_unprocessed(older_than_s=0, limit=settings.VERIFICATION_BATCH_SIZE)
        if not batch:
            break
        for event_pk in batch:
            services.provider_event_process(event_pk=event_pk, enqueue=_enqueue)
            done += 1
    return done


process_events.after_run = _events_left  # type: ignore[attr-defined]  # config/celery_app.py


@shared_task(name="verification.retry_events")
def retry_events() -> int:
    """Process again the stored events whose processing did not finish: a lost message, a
    crash, or a failed attempt whose backoff has run out (bounded: VERIFICATION_EVENT_MAX_ATTEMPTS):
    the drain is sent if any is waiting."""
    pending = selectors.events_unprocessed(
        older_than_s=settings.VERIFICATION_EVENT_RETRY_AFTER_S,
        limit=settings.VERIFICATION_BATCH_SIZE,
    )
    if pending:
        process_events_soon()
    return len(pending)


@shared_task(name="verification.prune_events")
def prune_events() -> int:
    return services.provider_events_prune(older_than_days=settings.VERIFICATION_EVENT_KEEP_DAYS)
