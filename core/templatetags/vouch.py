"""Template helpers shared by every Vouch page: `{% load vouch %}` then `{{ id|stripe_link }}`."""

from django import template
from django.utils.safestring import SafeString

from core import display
from core.dashboard import stripe_dashboard_url
from core.dashboard import stripe_link as _stripe_link

register = template.Library()


@register.filter
def stripe_link(provider_id: str | None) -> SafeString | str:
    return _stripe_link(provider_id)


@register.filter
def stripe_url(provider_id: str | None) -> str:
    return stripe_dashboard_url(provider_id) or ""


@register.filter
def usd(micro: int | None) -> SafeString | str:
    """`{{ amount_micro|usd }}`: `$20.00`, the micro-dollars in its title (core.display)."""
    return display.money(micro)


@register.filter
def dollars(micro: int | None) -> str:
    """`{{ amount_micro|dollars }}`: `$20.00` as plain text."""
    return display.NOTHING if micro is None else display.dollars(micro)


@register.filter
def moment(value: object) -> str:
    """`{{ value|moment }}`: `2026-12-01 06:30:00 UTC` from a datetime, an epoch or ISO text."""
    return display.moment(value)  # type: ignore[arg-type]
