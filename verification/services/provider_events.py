"""Provider events: stored once, processed with bounded retries (the runs they correlate with
woken, the apps' handlers run), given up with an escalation, pruned."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q

from verification import clock, events
from verification.contracts import Verdict, registry
from verification.events import InvalidProviderEvent as InvalidProviderEvent  # raised here
from verification.events import event_check
from verification.models import (
    ProviderEvent,
    Trigger,
    VerificationRun,
)
from verification.selectors import runs_due_waiting, runs_in_flight
from verification.services.attempts import run_claim_for_event, run_claim_monitor, run_wake_later
from verification.services.escalations import escalation_open
from verification.subjects import Subject
from verification.verifiers import dig

logger = logging.getLogger("vouch.verification")

# The escalation verdict of a provider event given up after its bounded retries.
EVENT_FAILED = "EVENT_FAILED"


def provider_event_store(
    *, event: dict[str, Any], raw: str, provider: str = "stripe", source: str = "webhook"
) -> tuple[ProviderEvent, bool]:
    """Store a verified event once (`source`: delivered by `webhook`, or found by reconciliation's
    `catch_up`). A duplicate delivery is counted and changes nothing else. Raises
    InvalidProviderEvent (code `invalid_event`, nothing stored) for a payload that is not a
    storable event (`events.event_check`)."""
    event_check(event)
    event_id = event["id"]
    try:
        with transaction.atomic():
            stored = ProviderEvent.objects.create(
                provider=provider,
                event_id=event_id,
                type=event["type"],
                provider_created=event["created"],
                payload=event,
                raw=raw,
                source=source,
            )
            return stored, True
    except IntegrityError:
        ProviderEvent.objects.filter(event_id=event_id).update(duplicates=F("duplicates") + 1)
        return ProviderEvent.objects.get(event_id=event_id), False


def _event_retry_delay(attempt: int) -> timedelta:
    """The gap after failed attempt `attempt` (1-based): base * 2^(attempt-1), at most the max."""
    base = float(settings.VERIFICATION_EVENT_RETRY_BASE_S)
    cap = float(settings.VERIFICATION_EVENT_RETRY_MAX_S)
    return timedelta(seconds=min(base * 2.0 ** min(attempt - 1, 62), cap))


def _event_claim(event_pk: int) -> ProviderEvent | None:
    """Take one attempt at an unprocessed event that is due: count it and set the next attempt's
    time before processing starts (so a task delivered twice, or the retry job, does not attempt
    it again meanwhile, and a worker that dies mid-attempt still used one up). None when the
    event is processed, given up, not due yet, or being claimed by another worker."""
    now = clock.now()
    with transaction.atomic():
        event = (
            ProviderEvent.objects.select_for_update(skip_locked=True)
            .filter(pk=event_pk, processed_at__isnull=True)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .first()
        )
        if event is None:
            return None
        event.attempts += 1
        event.next_attempt_at = now + _event_retry_delay(event.attempts)
        event.save(update_fields=["attempts", "next_attempt_at"])
    return event


def provider_event_process(*, event_pk: int, enqueue: Callable[[int, str, str], None]) -> list[int]:
    """Make one attempt at processing a stored event, if it is due: wake the runs it correlates
    with (pending runs get an attempt at once, or a mark that one is owed; VERIFIED runs get a
    monitoring attempt, as a duplicate after VERIFIED escalates) and run the handlers the apps
    registered for its type. Returns the run ids woken.

    Bounded: a failure (any exception from the handlers) is recorded on the event
    (`processing_error`, `attempts`) and the event is due again after a growing gap
    (`next_attempt_at`); after VERIFICATION_EVENT_MAX_ATTEMPTS failures it is given up —
    `processed_at` set with the error kept, one escalation (with its notification) opened — and
    pruned later like any processed event. Never raises for a handler's failure. Idempotent: a
    processed event, or one not due yet, is left alone."""
    event = _event_claim(event_pk)
    if event is None:
        return []
    try:
        woken = _event_wake_runs(event, enqueue)
        events.dispatch(event.payload)
    except Exception as exc:  # a handler's bug or an unreadable provider: bounded, recorded
        _event_failed(event, exc)
        return []
    ProviderEvent.objects.filter(pk=event.pk).update(
        processed_at=clock.now(), processing_error="", next_attempt_at=None
    )
    return woken


def _event_wake_runs(event: ProviderEvent, enqueue: Callable[[int, str, str], None]) -> list[int]:
    woken: list[int] = []
    room = _Room()
    for contract in registry().values():
        for channel in contract.channels:
            selection = channel.events
            if selection is None or event.type not in selection.types:
                continue
            pairs = [(name, dig(event.payload, path)) for name, path in selection.correlate.items()]
            query = Q()
            for name, value in pairs:
                if value not in (None, ""):
                    query |= Q(keys__name=name, keys__value=str(value))
            if not query:
                continue
            runs = VerificationRun.objects.filter(query, contract_id=contract.id).distinct()
            for run in runs.filter(verdict=Verdict.PENDING).only("id"):
                if room.left():
                    token = run_claim_for_event(run_id=run.id)
                    if token is not None:
                        room.taken()
                        enqueue(run.id, token, Trigger.EVENT)
                else:
                    run_wake_later(run_id=run.id)
                woken.append(run.id)
            monitor_since = clock.now() - timedelta(milliseconds=contract.timing.timeout_ms)
            for run in runs.filter(verdict=Verdict.VERIFIED, decided_at__gte=monitor_since).only(
                "id"
            ):
                if room.left() and not room.due_waiting() and run_claim_monitor(run_id=run.id):
                    room.taken()
                    enqueue(run.id, "", Trigger.MONITOR)
                else:
                    run_wake_later(run_id=run.id, monitor=True)
                woken.append(run.id)
    return woken


class _Room:
    """Whether an attempt may be sent now: fewer than VERIFICATION_IN_FLIGHT_MAX in flight. If
    not, the woken run is made due instead, and the bounded poll sends it (SPEC §11).

    Counted once per event and then kept by hand (each claim takes one): an event on a busy charge
    wakes every pending run of it, and a count of the runs in flight for each of them cost
    PostgreSQL more than the rest of the event (the rate-limits bench: 41,548 counts for 3,058
    events)."""

    def __init__(self) -> None:
        self._left: int | None = None
        self._due_waiting: bool | None = None

    def left(self) -> bool:
        if self._left is None:
            self._left = int(settings.VERIFICATION_IN_FLIGHT_MAX) - runs_in_flight()
        return self._left > 0

    def taken(self) -> None:
        if self._left is not None:
            self._left -= 1

    def due_waiting(self) -> bool:
        """A due run waits for room (`runs_due_waiting`), read once per event."""
        if self._due_waiting is None:
            self._due_waiting = runs_due_waiting()
        return self._due_waiting


def _event_failed(event: ProviderEvent, exc: Exception) -> None:
    """Record a failed attempt; on the last allowed one give the event up and escalate."""
    error = f"{type(exc).__name__}: {exc}"[:2000]
    limit = int(settings.VERIFICATION_EVENT_MAX_ATTEMPTS)
    if event.attempts < limit:
        ProviderEvent.objects.filter(pk=event.pk, processed_at__isnull=True).update(
            processing_error=error
        )
        logger.warning(
            "provider event %s (%s): attempt %s of %s failed, next at %s: %s",
            event.event_id,
            event.type,
            event.attempts,
            limit,
            event.next_attempt_at.isoformat() if event.next_attempt_at else "-",
            error,
        )
        return
    # The traceback is logged once, here, not at every attempt.
    logger.error(
        "provider event %s (%s): given up after %s attempts: %s",
        event.event_id,
        event.type,
        event.attempts,
        error,
        exc_info=exc,
    )
    with transaction.atomic():
        given_up = ProviderEvent.objects.filter(pk=event.pk, processed_at__isnull=True).update(
            processed_at=clock.now(), processing_error=error, next_attempt_at=None
        )
        if not given_up:  # processed meanwhile by another worker's attempt
            return
        escalation_open(
            verdict=EVENT_FAILED,
            verdict_class="event processing failed",
            reason=(
                f"Provider event {event.event_id} ({event.type}, received "
                f"{event.received_at:%Y-%m-%d %H:%M:%S %Z}) could not be processed in "
                f"{event.attempts} attempts and is no longer retried. Last error: {error}. "
                "Whatever it should have changed was not changed by it: look the object up in "
                "the Stripe Dashboard (reconciliation's next sweep also compares it) and resolve "
                "this with a note saying what was done."
            ),
            subject=Subject(type="provider_event", id=_event_subject_id(event), money=False),
        )


def _event_subject_id(event: ProviderEvent) -> str:
    """The event id as an escalation subject (100 characters at most: a longer id is named by
    its SHA-256, so two long ids never share an escalation)."""
    if len(event.event_id) <= 100:
        return event.event_id
    return "sha256:" + hashlib.sha256(event.event_id.encode()).hexdigest()


def provider_events_prune(*, older_than_days: int) -> int:
    cutoff = clock.now() - timedelta(days=older_than_days)
    deleted, _ = ProviderEvent.objects.filter(processed_at__lt=cutoff).delete()
    return deleted
