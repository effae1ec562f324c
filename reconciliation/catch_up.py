"""`reconciliation.catch_up` (SPEC §15.3): the provider's events that no webhook brought.

Every ten minutes the job lists the provider's refund, charge-refund, dispute and payment-intent
events from a stored cursor (minus an overlap, so an event whose `created` second the last run
was still reading is not missed), stores those not stored yet in the webhooks' own table (marked
`source="catch_up"`) and processes them exactly as a delivered webhook is processed: a lost
webhook is repaired within one run. Everything money-moving happens in the handlers the apps
registered for those events (the envelopes' release service, the disputes' services), never
here.

A run has two phases, each checkpointed so that a resumed run neither reads a page again nor
processes an event again:

- **list**: the events page by page (newest first, as the provider lists them), each page stored
  as an `Observation` with the SHA-256 of its bytes, and its new events stored, all in one
  transaction with the checkpoint (`starting_after`: the page's last event). When the list is
  done the cursor moves to the newest `created` seen (never backwards).
- **process**: the events this job stored and nobody processed yet, oldest first, read from the
  database in chunks (the checkpoint's `after` is the last one done), so memory stays flat
  however many events there are."""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from core.budget import CallBudget, budget_from_settings
from providers import Page, ProviderUnavailable, StripeProvider, provider_from_settings
from reconciliation.models import Cursor, Observation, Run, RunKind
from reconciliation.runs import run_checkpoint, run_fail, run_finish, run_start
from verification import clock
from verification.events import InvalidProviderEvent, event_check
from verification.models import ProviderEvent
from verification.services import provider_event_process, provider_event_store
from verification.tasks import _enqueue

logger = logging.getLogger("vouch.reconciliation")

# What is listed: the events some app acts on, and those Stripe sends about the same objects
# (funds_withdrawn/funds_reinstated, payment_intent.canceled) that a person may need to see.
# Named one by one: Stripe's `types[]` takes at most 20 and no wildcards at the provider.
EVENT_TYPES = (
    "refund.created",
    "refund.updated",
    "refund.failed",
    "charge.refunded",
    "charge.refund.updated",
    "charge.dispute.created",
    "charge.dispute.updated",
    "charge.dispute.closed",
    "charge.dispute.funds_withdrawn",
    "charge.dispute.funds_reinstated",
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "payment_intent.canceled",
)
CURSOR = "events"
SOURCE = "catch_up"
# No cursor yet (the very first run): this far back.
FIRST_WINDOW = timedelta(hours=24)
PAGE_SIZE = 100
# Events processed per database read in the process phase.
CHUNK = 100


def catch_up_run(*, now: datetime | None = None) -> Run:
    """Run the event catch-up once, or resume the catch-up that was interrupted, and return the
    finished run.

    Window: from the stored cursor (the newest event `created` a run has stored) minus
    `RECONCILIATION_EVENT_OVERLAP_S`, to `now`; on the very first run (no cursor yet), the last
    24 hours. The list has no upper bound (an event newer than `now` is read now and again by
    the next run's overlap, never missed). A resumed run keeps its own window and goes on from
    its checkpoint.

    Guarantees: every listed event not stored yet is stored once (`source="catch_up"`; an event a
    webhook already brought is left alone, not counted as a delivery) and then processed as its
    webhook would have been, oldest first; each page read is an `Observation` of the run with the
    SHA-256 of its bytes; `run.compared["event"]` counts the events listed, `run.pages` the pages
    and `run.provider_calls` the calls they took (retries included), all within the shared
    reconciliation call budget. The cursor never moves backwards. Two catch-ups never overlap
    (RunInProgress). A page that cannot be read fails the run (resumable) and re-raises
    `ProviderUnavailable`; an event whose processing raises is logged and left unprocessed, for
    the verification job that retries unprocessed events."""
    now = now or clock.now()
    run = run_start(kind=RunKind.CATCH_UP, window_start=_window_start(now), window_end=now)
    checkpoint: dict[str, Any] = dict(run.checkpoint)
    if checkpoint.get("phase", "list") == "list":
        try:
            checkpoint = _list(
                run,
                checkpoint,
                provider=provider_from_settings(),
                budget=budget_from_settings("reconciliation"),
            )
        except ProviderUnavailable as exc:
            run.provider_calls += exc.outcome.attempts  # calls all the same, against the budget
            run_checkpoint(run, **run.checkpoint)
            run_fail(run, error=str(exc))
            raise
    checkpoint = _process(run, checkpoint)
    logger.info(
        "reconciliation.catch_up %s: %s event(s) listed on %s page(s), %s stored, %s processed, "
        "%s failed to process, %s skipped as not storable",
        run.public_id,
        run.compared.get("event", 0),
        run.pages,
        checkpoint.get("stored", 0),
        checkpoint.get("processed", 0),
        checkpoint.get("failed", 0),
        checkpoint.get("rejected", 0),
    )
    return run_finish(run)


def _window_start(now: datetime) -> datetime:
    cursor = Cursor.objects.filter(name=CURSOR).first()
    if cursor is None:
        return now - FIRST_WINDOW
    return datetime.fromtimestamp(cursor.position - settings.RECONCILIATION_EVENT_OVERLAP_S, UTC)


# --- list ---------------------------------------------------------------------------------------


def _list(
    run: Run, checkpoint: dict[str, Any], *, provider: StripeProvider, budget: CallBudget
) -> dict[str, Any]:
    pages = provider.list_pages(
        "events",
        created_gte=int(run.window_start.timestamp()),
        types=EVENT_TYPES,
        starting_after=checkpoint.get("starting_after"),
        limit=PAGE_SIZE,
        budget=budget,
    )
    for page in pages:
        checkpoint = _page_record(run, checkpoint, page)
    newest = checkpoint.get("newest")
    checkpoint = {key: value for key, value in checkpoint.items() if key != "starting_after"}
    checkpoint["phase"] = "process"
    with transaction.atomic():
        if newest is not None:
            _cursor_advance(int(newest))
        run_checkpoint(run, **checkpoint)
    return checkpoint


def _page_record(run: Run, checkpoint: dict[str, Any], page: Page) -> dict[str, Any]:
    """One page, whole or not at all: its observation, its new events and the checkpoint after
    it commit together (a run taken over by another process rolls the page back)."""
    run.pages += 1
    run.provider_calls += page.attempts
    run.compared = {**run.compared, "event": run.compared.get("event", 0) + len(page.data)}
    events, rejected = _events_checked(page.data)
    created = [int(event["created"]) for event in events]
    newest = max([*created, int(checkpoint.get("newest") or 0)]) or None
    with transaction.atomic():
        Observation.objects.create(
            run=run,
            kind="events",
            request=page.params,
            body=zlib.compress(page.body, 1),
            body_length=len(page.body),
            sha256=hashlib.sha256(page.body).hexdigest(),
            observed_at=clock.now(),
        )
        stored = _events_store(events)
        checkpoint = {
            **checkpoint,
            "phase": "list",
            "starting_after": page.last_id or checkpoint.get("starting_after"),
            "newest": newest,
            "stored": int(checkpoint.get("stored", 0)) + stored,
            "rejected": int(checkpoint.get("rejected", 0)) + rejected,
        }
        run_checkpoint(run, **checkpoint)
    return checkpoint


def _events_checked(listed: Iterable[Any]) -> tuple[list[dict[str, Any]], int]:
    """The listed events Vouch can store, and how many it cannot: an event the webhook would
    refuse (`invalid_event`: an id or type too long, a bad `created`, a NUL, no `data` object) is
    logged and skipped, never a reason to stop the run; the page's observation keeps it."""
    events: list[dict[str, Any]] = []
    rejected = 0
    for event in listed:
        try:
            event_check(event)
        except InvalidProviderEvent as exc:
            rejected += 1
            name = event.get("id") if isinstance(event, dict) else None
            logger.warning(
                "reconciliation.catch_up: listed event %.100r skipped (%s: %s)",
                name,
                exc.details.get("field"),
                exc.message,
            )
            continue
        events.append(event)
    return events, rejected


def _events_store(events: Iterable[dict[str, Any]]) -> int:
    """Store the events not stored yet; returns how many. An event already here (a webhook
    brought it, or the overlap reads it again) is skipped before the store, so it is not counted
    as a second delivery."""
    events = list(events)
    known = set(
        ProviderEvent.objects.filter(event_id__in=[str(e["id"]) for e in events]).values_list(
            "event_id", flat=True
        )
    )
    stored = 0
    for event in events:
        if str(event["id"]) in known:
            continue
        # The page's exact bytes are the observation's; the event's own are re-serialized.
        _, created = provider_event_store(event=event, raw=json.dumps(event), source=SOURCE)
        if created:
            stored += 1
    return stored


def _cursor_advance(newest: int) -> None:
    """The cursor to `newest`, never backwards (one conditional statement)."""
    Cursor.objects.get_or_create(name=CURSOR, defaults={"position": newest})
    Cursor.objects.filter(name=CURSOR, position__lt=newest).update(
        position=newest, updated_at=clock.now()
    )


# --- process ------------------------------------------------------------------------------------


def _process(run: Run, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Process, oldest first, the events this job stored in the run's window that are still
    unprocessed, each as its webhook would be (outside any transaction: handlers read the
    provider). The checkpoint after each names the last one done."""
    since = int(run.window_start.timestamp())
    for pk, created in _unprocessed(since=since, after=checkpoint.get("after")):
        try:
            provider_event_process(event_pk=pk, enqueue=_enqueue)
            done = "processed"
        except Exception:
            # As after a webhook's failed task: the event stays unprocessed and the verification
            # job that retries unprocessed events takes it up; the other events go on.
            logger.exception("reconciliation.catch_up: processing event %s failed", pk)
            done = "failed"
        checkpoint = {
            **checkpoint,
            "phase": "process",
            "after": [created, pk],
            done: int(checkpoint.get(done, 0)) + 1,
        }
        run_checkpoint(run, **checkpoint)
    return checkpoint


def _unprocessed(*, since: int, after: list[int] | None) -> Iterator[tuple[int, int]]:
    """(pk, created) of the unprocessed caught-up events created since `since`, oldest first,
    after `after` ([created, pk]), read CHUNK at a time. Oldest first is `created` ascending and,
    within one second, id descending: a page lists newest first and is stored in that order, so
    of two events of one second the one stored later is the older."""
    while True:
        query = ProviderEvent.objects.filter(
            source=SOURCE, processed_at=None, provider_created__gte=since
        )
        if after is not None:
            created, pk = after
            query = query.filter(
                Q(provider_created__gt=created) | Q(provider_created=created, pk__lt=pk)
            )
        ordered = query.order_by("provider_created", "-pk").values_list("pk", "provider_created")
        chunk = list(ordered[:CHUNK])
        yield from chunk
        if len(chunk) < CHUNK:
            return
        pk, created = chunk[-1]
        after = [created, pk]
