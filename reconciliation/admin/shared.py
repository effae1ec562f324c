"""What the reconciliation admin's pages share: the balance moves each correction makes, in
words, and the presentation helpers (times, spans, badges, provider links, links to admin pages)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from core.dashboard import stripe_dashboard_url, stripe_link
from core.display import MICRO_PER_CENT, cents_text, moment, money
from envelopes.models import AdjustmentKind
from reconciliation.models import Discrepancy, DiscrepancyStatus, RunStatus, Severity
from verification.admin import compact_json

# What each correction does to the balances, in words the approver confirms.
MOVES = {
    AdjustmentKind.LEG_RELEASE: "reserved → unspent",
    AdjustmentKind.LEG_ACCEPT: "reserved → refunded",
    AdjustmentKind.LEG_REVERSE: "refunded → unspent",
    AdjustmentKind.FOREIGN_REFUND: "unspent → refunded",
    AdjustmentKind.FUNDING_ACCEPT: "funded and unspent +",
    AdjustmentKind.FUNDING_ABANDON: "no money moves (the leg is abandoned)",
    AdjustmentKind.CONFIRM: "no money moves (the ledger is confirmed as it stands)",
}


class _FormError(Exception):
    pass


SEVERITY_TONES = {Severity.MONEY: "bad", Severity.EVIDENCE: "warn", Severity.HYGIENE: "neutral"}


STATUS_TONES = {
    DiscrepancyStatus.OPEN: "bad",
    DiscrepancyStatus.ACKNOWLEDGED: "warn",
    DiscrepancyStatus.RESOLVED: "good",
}


RUN_TONES = {RunStatus.RUNNING: "warn", RunStatus.COMPLETED: "good", RunStatus.FAILED: "bad"}


def when(value: datetime | None) -> str:
    """Every time on these pages in the site's one format, with its time zone (core.display)."""
    return moment(value)


def span(delta: timedelta) -> str:
    """A length of time in its two largest units: `2 d 3 h`, `3 h 12 min`, `3 min 20 s`."""
    seconds = int(abs(delta).total_seconds())
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    return f"{seconds} s"


def time_left(discrepancy: Discrepancy, now: datetime) -> SafeString:
    """The time left to its target, or how long it is overdue (marked in words, not only in
    colour); nothing for a resolved one."""
    if discrepancy.status == DiscrepancyStatus.RESOLVED:
        return mark_safe('<span class="vouch-quiet">—</span>')
    left = discrepancy.due_at - now
    if left < timedelta(0):
        return format_html(
            '<span class="vouch-overdue" title="target {}">⚠ overdue by {}</span>',
            when(discrepancy.due_at),
            span(left),
        )
    return format_html(
        '<span class="vouch-left" title="target {}">{} left</span>',
        when(discrepancy.due_at),
        span(left),
    )


def dashboard_url(object_id: str) -> str:
    """The object in the Stripe Dashboard (`core.dashboard`: test or live by the key's mode), or ""
    for a value that is not a Stripe object's id (a status, an amount, a Vouch id)."""
    _, _, rest = object_id.partition("_")
    if not rest or not rest.isalnum():
        return ""
    return stripe_dashboard_url(object_id) or ""


def provider_id(object_id: str) -> SafeString | str:
    """A Stripe id as a link to the Dashboard, anything else as plain monospace text."""
    if object_id and dashboard_url(object_id):
        return stripe_link(object_id)
    return format_html('<span class="vouch-mono">{}</span>', object_id or "—")


def badge(text: str, tone: str) -> SafeString:
    return format_html('<span class="vouch-badge vouch-{}">{}</span>', tone, text)


def _url(name: str, *args: Any) -> str:
    return reverse(f"admin:reconciliation_{name}", args=args)


def _envelope_url(public_id: str) -> str:
    """The envelope's admin list, searched by its public id (the admin pages go by primary key)."""
    if not public_id:
        return ""
    return f"{reverse('admin:envelopes_envelope_changelist')}?{urlencode({'q': public_id})}"


# The sides' fields that hold money as the provider counts it: whole cents.
CENTS_FIELDS = frozenset({"amount", "amount_refunded", "amount_captured"})


def _cell(value: Any, absent: bool, *, field: str = "", currency: str = "usd") -> dict[str, Any]:
    """One side's value of one field. An amount in cents (both sides compare the provider's
    unit) reads as dollars, the micro-dollars in its title, with the raw cents labelled."""
    text = compact_json(value) if not absent else ""
    cents = (
        field in CENTS_FIELDS
        and not absent
        and isinstance(value, int)
        and not isinstance(value, bool)
    )
    return {
        "absent": absent,
        "text": text,
        "money": money(value * MICRO_PER_CENT) if cents else "",
        "cents": cents_text(value, currency) if cents else "",
        "url": dashboard_url(value) if isinstance(value, str) else "",
    }
