"""Budgets of provider calls per second, shared by every process on every host that calls the
provider (docs/decisions/0018-one-budget-per-stripe-limit.md).

Stripe limits requests per account, not per process: the web workers sending refunds, the Celery
workers polling verification and reconciliation's runs spend one allowance, and each endpoint has
an allowance of its own inside it. So each budget lives where every process already is, in the
database, as one row (`core.models.ProviderCallBudget`) holding the earliest moment its next call
may start: a GCRA (a leaky bucket with no burst). Slots of a budget are `spacing` apart
(`(1 + margin) / per_second`), so over any one-second window at most `per_second` calls start,
with the margin to spare for a process that wakes a little late. Time is the database's clock, so
processes on several hosts agree on it.

One call takes one slot from each of its budgets (the global one, its endpoint's, a lane's cap) at
the same moment, in ONE transaction with the rows locked in the order of their names, so two
processes never deadlock and never hold half a call's slots. Who goes first is decided by how far
ahead a call may look (`Priority`): money and a person's read reserve the next common slot if it
starts within their wait (first come, first served); a readback takes a slot only when every
budget has room now, so it never reserves ahead of money; reconciliation only when the shared
budgets have been idle a spacing longer, so waiting readbacks come first. A call that finds no
room within its wait is not sent (`slots_take` answers None), and the caller says so.

A 429 moves the next slot of the budgets it names past the provider's wait (`slots_penalize`):
every process sharing them holds off, not only the one that was told.

How long a call may wait is the caller's context (`budget_wait`), else the process's default:
`STRIPE_BUDGET_WAIT_S` (what a web request may wait), and `STRIPE_BUDGET_WORKER_WAIT_S` inside a
Celery task (config/celery_app.py).

Why the database and not Redis: `make run` runs on SQLite with Celery's filesystem broker and no
Redis at all; production has PostgreSQL too. It is the one store every deployment has and every
process shares, and at a few dozen calls a second a short transaction per call is nothing to it.

The transaction never joins the caller's: outside one (always, in Vouch: the provider is never
called inside a transaction) it runs on the thread's connection; inside one (a test's wrapping
transaction) on a connection of its own, so a budget is never held by, nor rolled back with,
someone else's work."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

if TYPE_CHECKING:
    from core.models import ProviderCallBudget


def _model() -> type[ProviderCallBudget]:
    """The budgets' table, imported when first used: the provider adapter imports this module,
    and a process that only counts its metrics (no Django app registry) must be able to."""
    from core.models import ProviderCallBudget

    return ProviderCallBudget


# A lane's budget (verification, reconciliation): each one-second window holds at most per_second
# slots with this much to spare. Stripe's limits use STRIPE_BUDGET_MARGIN.
WINDOW_MARGIN_S = 0.05
# A readback or reconciliation read that finds no room sleeps at least this long before it looks
# again (plus up to JITTER_S), so a full budget is not asked a hundred times a second.
MIN_PAUSE_S = 0.05
JITTER_S = 0.02


class Priority(StrEnum):
    """Who goes first when a budget is short, by how far ahead a call may reserve."""

    MONEY = "money"  # a write with an idempotency key: reserves the next slot within its wait
    PERSON = "person"  # a read without a lane, for a person: reserves like money
    READBACK = "readback"  # verification's reads: only a slot free now
    RECONCILE = "reconcile"  # reconciliation's reads: only after a spacing of idle


# The budgets Vouch's lanes run, the setting naming each one's calls per second, and the priority
# of their calls.
BUDGET_SETTINGS = {
    "reconciliation": ("RECONCILIATION_MAX_RPS", Priority.RECONCILE),
    "verification": ("VERIFICATION_MAX_RPS", Priority.READBACK),
}

_NOW = {
    "postgresql": "EXTRACT(EPOCH FROM clock_timestamp())::double precision",
    # SQLite's 'now' is the same within one statement, and has millisecond resolution.
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_GREATEST = {"postgresql": "GREATEST", "sqlite": "MAX"}
_FOR_UPDATE = {"postgresql": " FOR UPDATE", "sqlite": ""}  # SQLite: BEGIN IMMEDIATE locks all

# No slot before now + the provider's wait (an earlier penalty that lasts longer stands).
_PENALIZE = (
    "INSERT INTO {table} (name, next_slot_at) VALUES {values} "
    "ON CONFLICT (name) DO UPDATE "
    "SET next_slot_at = {greatest}({table}.next_slot_at, excluded.next_slot_at)"
)


@dataclass(frozen=True)
class CallBudget:
    """At most `per_second` provider calls a second, across every process using the same `name`.
    `per_second <= 0` is unlimited and costs nothing (no database write). `lane`: the priority of
    the calls this budget caps (a lane's own budget); None for one of the provider's limits, which
    every call shares."""

    name: str
    per_second: float
    lane: Priority | None = None
    margin: float = WINDOW_MARGIN_S

    def __post_init__(self) -> None:
        limit = _model()._meta.get_field("name").max_length or 0
        if not self.name or len(self.name) > limit:
            raise ValueError(f"a budget's name is 1 to {limit} characters, not {self.name!r}")

    @property
    def limited(self) -> bool:
        return self.per_second > 0

    @property
    def spacing(self) -> float:
        return (1.0 + self.margin) / self.per_second

    def take(self, *, wait_s: float = math.inf) -> float | None:
        """One slot of this budget alone, reserved like money: the seconds waited, or None if the
        slot is further than `wait_s` away."""
        return slots_take([self], priority=self.lane or Priority.PERSON, wait_s=wait_s)

    def penalize(self, seconds: float) -> None:
        """The provider asked to wait `seconds` (a 429): no process sharing this budget starts a
        call before then."""
        slots_penalize([self], seconds)


def budget_from_settings(name: str) -> CallBudget:
    """The lane budget `name` ("reconciliation", "verification") at its configured calls per
    second (0: no cap of its own; its calls still take from Stripe's limits, at its priority)."""
    entry = BUDGET_SETTINGS.get(name)
    if entry is None:
        raise ValueError(f"no call budget {name!r} (known: {', '.join(sorted(BUDGET_SETTINGS))})")
    setting, priority = entry
    return CallBudget(name, float(getattr(settings, setting)), lane=priority)


# --- how long a call may wait -----------------------------------------------------------------

_WAIT: ContextVar[float | None] = ContextVar("vouch_budget_wait", default=None)


@contextmanager
def budget_wait(seconds: float) -> Iterator[None]:
    """Provider calls made inside wait at most `seconds` for room in their budgets."""
    token = _WAIT.set(max(0.0, float(seconds)))
    try:
        yield
    finally:
        _WAIT.reset(token)


def current_wait_s() -> float:
    """How long a provider call made here may wait for room: the innermost `budget_wait`, else
    the process's default (STRIPE_BUDGET_WAIT_S)."""
    chosen = _WAIT.get()
    return float(settings.STRIPE_BUDGET_WAIT_S) if chosen is None else chosen


# --- taking slots -----------------------------------------------------------------------------


def slots_take(
    budgets: Sequence[CallBudget], *, priority: Priority, wait_s: float | None = None
) -> float | None:
    """One slot of every limited budget in `budgets`, all at the same moment, at `priority`;
    sleeps until that moment. Answers the seconds waited (0.0 with no limited budget: nothing is
    written), or None when there was no room within `wait_s` (default: `current_wait_s()`), in
    which case nothing was taken."""
    limited: dict[str, CallBudget] = {}
    for budget in budgets:
        if budget.limited:
            known = limited.get(budget.name)
            if known is None or budget.spacing > known.spacing:
                limited[budget.name] = budget
    if not limited:
        return 0.0
    ordered = [limited[name] for name in sorted(limited)]  # the one order every process locks in
    wait = current_wait_s() if wait_s is None else max(0.0, wait_s)
    began = time.monotonic()
    deadline = began + wait
    while True:
        remaining = max(0.0, deadline - time.monotonic())
        taken, seconds = _try(ordered, priority, remaining)
        if taken:
            if seconds > 0:
                time.sleep(seconds)
            return time.monotonic() - began
        # Nothing was taken. A slot only ever moves later, so one beyond the wait never comes.
        if seconds > remaining:
            return None
        time.sleep(min(max(seconds, MIN_PAUSE_S) + random.uniform(0, JITTER_S), remaining))  # noqa: S311


def slots_penalize(budgets: Sequence[CallBudget], seconds: float) -> None:
    """No call on any of `budgets` starts before now + `seconds` (one statement, rows in order)."""
    names = sorted({b.name for b in budgets if b.limited})
    if not names or seconds <= 0:
        return
    with _transaction() as connection:
        vendor = connection.vendor
        values = ", ".join(f"(%s, {_NOW[vendor]} + %s)" for _ in names)
        sql = _PENALIZE.format(table=_table(connection), values=values, greatest=_GREATEST[vendor])
        with connection.cursor() as cursor:
            cursor.execute(sql, [p for name in names for p in (name, float(seconds))])


def _try(budgets: list[CallBudget], priority: Priority, remaining: float) -> tuple[bool, float]:
    """In one transaction: (True, seconds until the slot taken) or (False, seconds until one
    could be: nothing written)."""
    names = [b.name for b in budgets]
    with _transaction() as connection:
        vendor = connection.vendor
        table = _table(connection)
        marks = ", ".join(["%s"] * len(names))
        # Only our table's name and placeholders are formatted in: the values are parameters.
        select = (
            f"SELECT name, next_slot_at FROM {table} WHERE name IN ({marks}) "  # noqa: S608
            f"ORDER BY name{_FOR_UPDATE[vendor]}"
        )
        with connection.cursor() as cursor:
            cursor.execute(select, names)
            stored = dict(cursor.fetchall())
            if len(stored) < len(names):  # a budget's first call: its row, then the lock
                rows = ", ".join(["(%s, 0)"] * len(names))
                cursor.execute(
                    f"INSERT INTO {table} (name, next_slot_at) VALUES {rows} "  # noqa: S608
                    "ON CONFLICT (name) DO NOTHING",
                    names,
                )
                cursor.execute(select, names)
                stored = dict(cursor.fetchall())
            # After the locks: the moment this process holds them, not when it asked.
            cursor.execute(f"SELECT {_NOW[vendor]}")
            now = float(cursor.fetchone()[0])
            nexts = {name: float(value) for name, value in stored.items()}
            if priority in (Priority.MONEY, Priority.PERSON):
                start = max(now, *nexts.values())
                if start - now > remaining:
                    return False, start - now
            else:
                idle = priority is Priority.RECONCILE
                ready = max(
                    nexts[b.name] + (b.spacing if idle and b.lane is None else 0.0) for b in budgets
                )
                if ready > now:
                    return False, ready - now
                start = now
            cases = " ".join(["WHEN %s THEN %s"] * len(budgets))
            cursor.execute(
                f"UPDATE {table} SET next_slot_at = CASE name {cases} END "  # noqa: S608
                f"WHERE name IN ({marks})",
                [*(p for b in budgets for p in (b.name, start + b.spacing)), *names],
            )
            return True, start - now


@contextmanager
def _transaction() -> Iterator[BaseDatabaseWrapper]:
    alias = router.db_for_write(_model())
    connection = connections[alias]
    if connection.vendor not in _NOW:  # pragma: no cover - Vouch runs on PostgreSQL and SQLite
        raise NotImplementedError(f"call budgets are not written for {connection.vendor}")
    if connection.get_autocommit() and not connection.in_atomic_block:
        # On SQLite `make run`'s settings begin IMMEDIATE: the write lock first, no upgrade race.
        with transaction.atomic(using=alias):
            yield connection
        return
    if connection.vendor == "sqlite":
        # A second connection would wait for the caller's own write lock until it times out.
        raise RuntimeError(
            "a call budget is taken outside any transaction (the provider is never called inside "
            "one); on SQLite it cannot be taken beside one"
        )
    own = connections.create_connection(alias)
    try:
        own.ensure_connection()
        own.set_autocommit(False)
        try:
            yield own
        except BaseException:
            own.rollback()
            raise
        own.commit()
    finally:
        own.close()


def _table(connection: BaseDatabaseWrapper) -> str:
    return str(connection.ops.quote_name(_model()._meta.db_table))
