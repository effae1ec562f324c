"""Legs waiting for room in Stripe's rate limit (issue 40,
docs/decisions/0019-a-refund-waits-as-a-row.md).

Stripe takes at most 25 refund creations a second on one account (docs.stripe.com/rate-limits),
and `core.budget` keeps every Vouch process under that. A buyer's request never waits on a full
budget: its leg is reserved as always, answered `202 pending`, and waits here (`deferred_at`, its
place in the queue). This worker job sends the waiting legs oldest first, as room frees, under
their own keys (a resend can never refund or charge twice): a few threads, each reserving the next
slot of the budget and sleeping until it, so the endpoint is used to its limit while legs wait.

A leg is claimed by clearing its `deferred_at` in a conditional update: two workers never send
the same leg twice at once, and a worker that dies with a claimed leg leaves it reserved (the
stranded-leg job resumes it, same key). A leg that finds no room again goes back in its place."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections, connections, transaction

from core.budget import budget_wait
from core.ticks import tick_hold
from envelopes.models import FundingLeg, RefundLeg
from envelopes.schedules import WAITING_SCHEDULE
from envelopes.services.funding import FUNDING_REFUSALS, funding_send
from envelopes.services.journal import waiting
from envelopes.services.refunds import refund_leg_send

logger = logging.getLogger("vouch.envelopes")

# How long one run may send before it ends (the next tick starts another). A run holds its slot
# while it sends (core.ticks.tick_hold, every HOLD_EVERY_S for HOLD_S): a backlog of minutes is
# drained by one run, never paused while its next tick waits for a free worker process.
RUN_SECONDS = 600.0
HOLD_EVERY_S = 10.0
HOLD_S = 60.0
# Legs in flight at once: each holds one reserved slot of the budget and sleeps until it, so a few
# keep a 25-a-second endpoint busy however long Stripe takes to answer one.
THREADS = 12
# psycopg_pool's own default when a pool is asked for with no size (`"pool": True`): min_size 4,
# and max_size equal to it.
POOL_DEFAULT_MAX = 4


def threads_for_pool(asked: int) -> int:
    """No more sending threads than the process's database pool has connections for, less the
    one the job's own thread keeps (production gives every process psycopg's pool,
    DATABASE_POOL_MAX_SIZE): a thread holds its connection for its whole run, and one past the
    pool waited DATABASE_POOL_TIMEOUT_S for nothing and failed with PoolTimeout, its share of the
    queue left for later runs. Without a pool, as asked."""
    pool = (settings.DATABASES["default"].get("OPTIONS") or {}).get("pool")
    if not pool:
        return max(1, asked)
    size = pool.get("max_size") or pool.get("min_size") if isinstance(pool, dict) else None
    return max(1, min(asked, int(size or POOL_DEFAULT_MAX) - 1))


def waiting_count() -> dict[str, int]:
    """How many refund and funding legs wait for room now (the queue's depth)."""
    return {
        "refund_legs": waiting(RefundLeg).count(),
        "funding_legs": waiting(FundingLeg).count(),
    }


def _head(model: type[RefundLeg] | type[FundingLeg]) -> tuple[int, datetime] | None:
    """The oldest waiting leg of this kind that no one else is claiming: (id, its place)."""
    row = (
        waiting(model)
        .select_for_update(skip_locked=True)
        .order_by("deferred_at", "id")
        .values_list("pk", "deferred_at")
        .first()
    )
    if row is None or row[1] is None:
        return None
    return row[0], row[1]


def _claim() -> tuple[type[RefundLeg] | type[FundingLeg], int, datetime] | None:
    """Take the oldest waiting leg, refund or funding: (its model, id, place in the queue)."""
    if not _any_waiting():  # a plain read first: no write lock (SQLite's) when none waits
        return None
    for _ in range(5):  # a race lost on SQLite is tried again, a few times
        with transaction.atomic():
            heads = [
                (head[1], head[0], model)
                for model in (RefundLeg, FundingLeg)
                if (head := _head(model)) is not None
            ]
            if not heads:
                return None
            since, pk, model = min(heads, key=lambda head: (head[0], head[1]))
            # Conditional: on SQLite (no row locks) two claimers may read one head; one wins.
            if model.objects.filter(pk=pk, deferred_at=since).update(deferred_at=None):
                return model, pk, since
    return None


def _any_waiting() -> bool:
    return any(waiting(model).exists() for model in (RefundLeg, FundingLeg))


def _send_one() -> bool:
    """Claim and send one waiting leg; False when none waits, or when the leg found no room
    again (it is back in its place: the budget is held off longer than a worker waits)."""
    claimed = _claim()
    if claimed is None:
        return False
    model, pk, since = claimed
    if model is RefundLeg:
        leg = RefundLeg.objects.select_related("funding_leg", "operation__envelope").get(pk=pk)
        return refund_leg_send(leg=leg, queued_since=since).deferred_at is None
    funding = FundingLeg.objects.select_related("envelope").get(pk=pk)
    try:
        return funding_send(leg=funding, queued_since=since).leg.deferred_at is None
    except FUNDING_REFUSALS:
        return True  # a decline is recorded (the pending leg is gone): it was sent


def _drain(deadline: float, wait_s: float) -> int:
    sent = 0
    try:
        with budget_wait(wait_s):
            sent = _drain_until(deadline)
    finally:
        close_old_connections()
        connections.close_all()  # this thread's own connections
    return sent


def _drain_until(deadline: float) -> int:
    sent = 0
    while time.monotonic() < deadline:
        try:
            if not _send_one():
                break
        except Exception:
            logger.exception("sending a leg that waited for room failed")
            break
        sent += 1
    return sent


def waiting_send(*, seconds: float = RUN_SECONDS, threads: int = THREADS) -> int:
    """The worker job: send legs waiting for room, oldest first, for at most `seconds`; the number
    sent. Ends early when none is left."""
    if not _any_waiting():
        return 0  # the tick of every second, most of the time: one read, no thread
    deadline = time.monotonic() + seconds
    # A worker's wait, wherever this runs (the job, or `manage.py shell`): these legs are the ones
    # that may wait; each thread starts its own context (contextvars do not cross threads).
    wait_s = settings.STRIPE_BUDGET_WORKER_WAIT_S
    count = threads_for_pool(threads)
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="waiting") as pool:
        futures = [pool.submit(_drain, deadline, wait_s) for _ in range(count)]
        running = set(futures)
        while running:
            tick_hold(WAITING_SCHEDULE, seconds=HOLD_S)
            _, running = wait(running, timeout=HOLD_EVERY_S)
    sent = sum(future.result() for future in futures)
    if sent:
        logger.info("sent %d legs that waited for room in Stripe's rate limit", sent)
    return sent
