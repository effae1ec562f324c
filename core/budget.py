"""A budget of provider calls per second, shared by every process that calls the provider.

Stripe limits requests per account, not per process: a reconciliation run in one worker and
verification polling in three others spend one allowance. So the budget lives where every process
already is, in the database, as one row per budget (`core.models.ProviderCallBudget`) holding the
earliest moment its next call may start. It is a GCRA (a leaky bucket with no burst): `take()`
reserves the next slot and moves it on by one spacing in ONE statement of its own (an upsert with
RETURNING, on PostgreSQL and on SQLite >= 3.35), then sleeps until its slot. Slots are spaced
`(1 + WINDOW_MARGIN_S) / per_second` apart, so over any one-second window at most `per_second`
calls start, with 50 ms to spare for a process that wakes a little late (a busy machine's
scheduling, the reply's trip from the database), at the cost of a twentieth of the rate. Time is
the database's clock, so processes on several hosts agree on it.
A 429 with `Retry-After` moves the next slot past the provider's wait (`penalize`): every process
sharing the budget holds off, not only the one that was told.

Why the database and not Redis: `make run` runs on SQLite with Celery's filesystem broker, and no
Redis at all; production has PostgreSQL too. The database is the one store every deployment has
and every process shares, and at a few dozen calls a second one single-row update per call is
nothing to it. Redis would be a second store to run locally and a second source of truth.

The statement never joins the caller's transaction: outside one (always, in Vouch: the provider
is never called inside a transaction) it runs alone in autocommit on the thread's connection;
inside one (a test's wrapping transaction) it runs on a connection of its own, opened for it, so
a budget is never held by, nor rolled back with, someone else's work."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from core.models import ProviderCallBudget

# Each window of one second holds at most per_second slots with this much to spare.
WINDOW_MARGIN_S = 0.05

# The budgets Vouch runs, and the setting that names each one's calls per second.
BUDGET_SETTINGS = {
    "reconciliation": "RECONCILIATION_MAX_RPS",
    "verification": "VERIFICATION_MAX_RPS",
}

_NOW = {
    "postgresql": "EXTRACT(EPOCH FROM clock_timestamp())::double precision",
    # SQLite's 'now' is the same within one statement, and has millisecond resolution.
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_GREATEST = {"postgresql": "GREATEST", "sqlite": "MAX"}

# Reserve the next slot: the later of the stored slot and now; the row then holds the slot after.
_TAKE = (
    "INSERT INTO {table} (name, next_slot_at) VALUES (%s, {now} + %s) "
    "ON CONFLICT (name) DO UPDATE "
    "SET next_slot_at = {greatest}({table}.next_slot_at, {now}) + %s "
    "RETURNING next_slot_at, {now}"
)
# No slot before now + the provider's wait (an earlier penalty that lasts longer stands).
_PENALIZE = (
    "INSERT INTO {table} (name, next_slot_at) VALUES (%s, {now} + %s) "
    "ON CONFLICT (name) DO UPDATE "
    "SET next_slot_at = {greatest}({table}.next_slot_at, excluded.next_slot_at)"
)


@dataclass(frozen=True)
class CallBudget:
    """At most `per_second` provider calls a second, across every process using the same `name`.
    `per_second <= 0` is unlimited and costs nothing (no database write)."""

    name: str
    per_second: float

    def __post_init__(self) -> None:
        limit = ProviderCallBudget._meta.get_field("name").max_length or 0
        if not self.name or len(self.name) > limit:
            raise ValueError(f"a budget's name is 1 to {limit} characters, not {self.name!r}")

    @property
    def limited(self) -> bool:
        return self.per_second > 0

    def take(self) -> float:
        """Block until this process may start one call; returns the seconds it waited."""
        if not self.limited:
            return 0.0
        spacing = (1.0 + WINDOW_MARGIN_S) / self.per_second
        row = _execute(_TAKE, [self.name, spacing, spacing])
        next_slot_at, now = float(row[0]), float(row[1])
        wait = next_slot_at - spacing - now
        if wait <= 0:
            return 0.0
        time.sleep(wait)
        return wait

    def penalize(self, seconds: float) -> None:
        """The provider asked to wait `seconds` (a 429): no process sharing this budget starts a
        call before then."""
        if not self.limited or seconds <= 0:
            return
        _execute(_PENALIZE, [self.name, float(seconds)], returns=False)


def budget_from_settings(name: str) -> CallBudget:
    """The budget `name` ("reconciliation", "verification") at its configured calls per second."""
    setting = BUDGET_SETTINGS.get(name)
    if setting is None:
        raise ValueError(f"no call budget {name!r} (known: {', '.join(sorted(BUDGET_SETTINGS))})")
    return CallBudget(name, float(getattr(settings, setting)))


def _execute(template: str, params: list[Any], *, returns: bool = True) -> Any:
    alias = router.db_for_write(ProviderCallBudget)
    connection = connections[alias]
    if connection.get_autocommit() and not connection.in_atomic_block:
        return _run(connection, template, params, returns)
    if connection.vendor == "sqlite":
        # A second connection would wait for the caller's own write lock until it times out.
        raise RuntimeError(
            "a call budget is taken outside any transaction (the provider is never called inside "
            "one); on SQLite it cannot be taken beside one"
        )
    own = connections.create_connection(alias)
    try:
        return _run(own, template, params, returns)
    finally:
        own.close()


def _run(connection: BaseDatabaseWrapper, template: str, params: list[Any], returns: bool) -> Any:
    vendor = connection.vendor
    if vendor not in _NOW:  # pragma: no cover - Vouch runs on PostgreSQL, and SQLite locally
        raise NotImplementedError(f"call budgets are not written for {vendor}")
    sql = template.format(
        table=connection.ops.quote_name(ProviderCallBudget._meta.db_table),
        now=_NOW[vendor],
        greatest=_GREATEST[vendor],
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() if returns else None
