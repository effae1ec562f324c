"""The ground every envelope service stands on: the one door to the provider, and the journal —
each movement of money an UPDATE of the envelope's balances and the INSERT of its entry, in the
caller's transaction under the envelope's row lock (envelope before leg)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core import db
from envelopes.models import (
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from providers import IDEMPOTENCY_KEY_TTL, provider_from_settings

PROVIDER_KEY_TTL = IDEMPOTENCY_KEY_TTL


def _provider() -> Any:
    return provider_from_settings()


_BALANCE_COLUMNS = {
    "funded": "total_funded_micro",
    "debited": "total_debited_micro",
    "refunded": "total_refunded_micro",
    "reserved": "reserved_micro",
    "unspent": "unspent_micro",
    "held": "held_micro",
    "charged_back": "charged_back_micro",
}
_LINKS = ("funding_leg", "debit", "refund_leg", "adjustment", "provider_read", "dispute_funds")


def legs_waiting(model: type[RefundLeg] | type[FundingLeg]) -> bool:
    """Whether any leg of this kind waits for room in Stripe's rate limit (never when Vouch runs
    without budgets: nothing is then ever deferred, and no query is made)."""
    if settings.STRIPE_RATE_LIMITS == "off":
        return False
    return waiting(model).exists()


def waiting(model: type[RefundLeg] | type[FundingLeg]) -> Any:
    """The legs of this kind that wait for room: marked, and not answered since."""
    if model is RefundLeg:
        return RefundLeg.objects.filter(
            deferred_at__isnull=False, outcome__in=[LegOutcome.RESERVED, LegOutcome.UNKNOWN]
        )
    return FundingLeg.objects.filter(deferred_at__isnull=False, status=FundingStatus.PENDING)


def _move(envelope: Envelope | int, kind: str, *, note: str = "", **links: Any) -> None:
    """Apply one movement to an envelope and journal it. Deltas are keyword arguments `funded`,
    `debited`, `refunded`, `reserved`, `unspent`, `held`, `charged_back`; links are `funding_leg`,
    `debit`, `refund_leg`, `adjustment`, `provider_read` (what the provider showed, cited by the
    entry), `dispute_funds` (the chargeback a hold, reinstatement or charge back is about).
    The database checks that the balances still add up and that none goes negative. `envelope`
    is the locked row (its fields follow the movement) or the id of one this transaction has not
    locked yet: the UPDATE then takes the row lock, as the first statement of the transaction
    must (envelope before leg)."""
    statements, deltas = _movement(envelope, kind, note=note, **links)
    db.execute(statements)
    _follow(envelope, deltas)


def _move_statements(
    envelope: Envelope | int, kind: str, *, note: str = "", returning: bool = False, **links: Any
) -> list[db.Statement]:
    """`_move` as statements, for a batch (core.db.execute) that runs them with others; a link may
    be a `db.Ref` to a row inserted earlier in the batch. The envelope's fields follow the
    movement at once: run the batch in the caller's transaction before using them. `returning`:
    the envelope's UPDATE (the first statement) returns the row as it leaves it, for
    `db.instances`."""
    statements, deltas = _movement(envelope, kind, note=note, returning=returning, **links)
    _follow(envelope, deltas)
    return statements


def _follow(envelope: Envelope | int, deltas: dict[str, int]) -> None:
    if isinstance(envelope, Envelope):
        for name, delta in deltas.items():
            column = _BALANCE_COLUMNS[name]
            setattr(envelope, column, getattr(envelope, column) + delta)


def _movement(
    envelope: Envelope | int, kind: str, *, note: str = "", returning: bool = False, **links: Any
) -> tuple[list[db.Statement], dict[str, int]]:
    """The UPDATE of the envelope's balances and the INSERT of its journal entry, and the deltas.

    Plain SQL, not the ORM: this runs twice per refund leg, and building these two statements
    through the ORM cost four times as much CPU as executing them (0.69 ms against 0.15 ms per
    movement, measured)."""
    deltas = {name: int(links.pop(name, 0)) for name in _BALANCE_COLUMNS}
    linked = {name: links.pop(name, None) for name in _LINKS}
    if links:
        raise TypeError(f"unknown movement arguments: {sorted(links)}")
    envelope_id = envelope.pk if isinstance(envelope, Envelope) else int(envelope)
    changed = [(_BALANCE_COLUMNS[name], delta) for name, delta in deltas.items() if delta]
    envelope_table = connection.ops.quote_name(Envelope._meta.db_table)
    journal_table = connection.ops.quote_name(JournalEntry._meta.db_table)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    statements = []
    if changed:
        assignments = ", ".join(f"{column} = {column} + %s" for column, _ in changed)
        tail = f" RETURNING {db.columns(Envelope)}" if returning else ""
        statements.append(
            db.Statement(
                f"UPDATE {envelope_table} SET {assignments} WHERE id = %s{tail}",  # noqa: S608
                (*(delta for _, delta in changed), envelope_id),
                rows=returning,
            )
        )
    link_sql: list[str] = []
    link_params: list[Any] = []
    for item in linked.values():
        if isinstance(item, db.Ref):
            sql, params = item.sql()
        else:
            sql, params = "%s", (item.pk if item is not None else None,)
        link_sql.append(sql)
        link_params.extend(params)
    statements.append(
        db.Statement(
            f"INSERT INTO {journal_table} (envelope_id, kind, funded_delta, debited_delta, "  # noqa: S608
            "refunded_delta, reserved_delta, unspent_delta, held_delta, charged_back_delta, note, "
            "funding_leg_id, debit_id, refund_leg_id, adjustment_id, provider_read_id, "
            "dispute_funds_id, created_at) "
            f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {', '.join(link_sql)}, %s)",
            (envelope_id, kind, *deltas.values(), note, *link_params, now),
        )
    )
    return statements, deltas


def _funding_move(funding_leg_id: int, *, reserved: int = 0, refunded: int = 0) -> None:
    """Move money between a funding leg's reserved and refunded amounts (the database checks they
    stay within the leg's amount), under the envelope's lock taken before."""
    db.execute([_funding_move_statement(funding_leg_id, reserved=reserved, refunded=refunded)])


def _funding_hold(funding_leg_id: int, *, held: int = 0, charged_back: int = 0) -> None:
    """Move a funding leg's held and charged-back amounts (SPEC §18; the database checks they stay
    within the leg's amount), under the envelope's lock taken before."""
    table = connection.ops.quote_name(FundingLeg._meta.db_table)
    db.execute(
        [
            db.Statement(
                f"UPDATE {table} SET held_micro = held_micro + %s, "  # noqa: S608
                "charged_back_micro = charged_back_micro + %s WHERE id = %s",
                (int(held), int(charged_back), funding_leg_id),
            )
        ]
    )


def _funding_move_statement(
    funding_leg_id: int, *, reserved: int = 0, refunded: int = 0
) -> db.Statement:
    table = connection.ops.quote_name(FundingLeg._meta.db_table)
    return db.Statement(
        f"UPDATE {table} SET reserved_micro = reserved_micro + %s, "  # noqa: S608
        "refunded_micro = refunded_micro + %s WHERE id = %s",
        (int(reserved), int(refunded), funding_leg_id),
    )
