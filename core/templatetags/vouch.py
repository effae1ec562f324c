"""Template helpers shared by every Vouch page: `{% load vouch %}` then `{{ id|stripe_link }}`,
`{{ id|id_link }}` (any id to its object, `core.links`), `{{ text|link_ids }}`."""

from django import template
from django.utils.safestring import SafeString

from core import display, links
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


@register.filter
def id_link(value: str | None) -> SafeString | str:
    """`{{ id|id_link }}`: a Vouch id to its admin page, a provider id to the Dashboard."""
    return links.id_link(value)


@register.filter
def link_ids(text: str | None) -> SafeString:
    """`{{ reason|link_ids }}`: the text, escaped, with every id in it linked to its object."""
    return links.link_ids(text)
