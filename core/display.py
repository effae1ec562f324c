"""How every Vouch page shows an amount and a moment (SPEC §10): one place, so the console, the
admin and the buyer's pages read alike.

- An amount reads as dollars (`$20.00`; every digit when it is not whole cents: `$0.005433`), exact
  from the integer micro-dollars, which stay one hover away (`title`) or in a column of their own.
- A moment reads as `2026-12-01 06:30:00 UTC` (config/formats), whether it was a datetime, an ISO
  8601 string or a Unix epoch (the provider's `created`, a contract's `due_by`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal

from django.utils.dateformat import format as date_format_with
from django.utils.html import format_html
from django.utils.safestring import SafeString

MICRO_PER_DOLLAR = 1_000_000
MICRO_PER_CENT = 10_000
NOTHING = "—"
MOMENT_FORMAT = "Y-m-d H:i:s T"


def dollars(micro: int) -> str:
    """`$13.76` for whole cents, every digit otherwise (`$0.005433`): exact, from the integer."""
    value = abs(Decimal(micro).scaleb(-6))
    places = 2 if micro % MICRO_PER_CENT == 0 else 6
    return f"{'-' if micro < 0 else ''}${value:,.{places}f}"


def micro_text(micro: int) -> str:
    """`20,000,000` (the integer micro-dollars, grouped)."""
    return f"{micro:,}"


def money(micro: int | None) -> SafeString | str:
    """`$20.00` with the micro-dollars in its title (`20,000,000 micro-dollars`)."""
    if micro is None:
        return NOTHING
    return format_html(
        '<span class="vouch-money" title="{} micro-dollars">{}</span>',
        micro_text(micro),
        dollars(micro),
    )


def cents_text(cents: int, currency: str = "usd") -> str:
    """A provider's raw amount, labelled as what it is: `100 cents (usd)`."""
    return f"{cents:,} cents ({currency.lower()})"


def as_moment(value: datetime | int | float | str | None) -> datetime | None:
    """A datetime from a datetime, a Unix epoch (seconds) or an ISO 8601 string; None otherwise."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return as_moment(int(text))
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def moment(value: datetime | int | float | str | None) -> str:
    """`2026-12-01 06:30:00 UTC` (UTC, the site's zone); `—` for nothing; any other text as is."""
    parsed = as_moment(value)
    if parsed is None:
        return NOTHING if value in (None, "") else str(value)
    return date_format_with(parsed.astimezone(UTC), MOMENT_FORMAT)


def words_for(labels: Mapping[str, str], code: str | None) -> str:
    """`code` in `labels`' words (issue 41: codes are for machines); a code with no words is made
    readable (`foo_bar`: "Foo bar"). One rule for every app's label mappings."""
    code = code or ""
    return labels.get(code) or code.replace("_", " ").capitalize()
