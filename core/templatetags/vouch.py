"""Template helpers shared by every Vouch page: `{% load vouch %}` then `{{ id|stripe_link }}`."""

from django import template
from django.utils.safestring import SafeString

from core.dashboard import stripe_dashboard_url
from core.dashboard import stripe_link as _stripe_link

register = template.Library()


@register.filter
def stripe_link(provider_id: str | None) -> SafeString | str:
    return _stripe_link(provider_id)


@register.filter
def stripe_url(provider_id: str | None) -> str:
    return stripe_dashboard_url(provider_id) or ""
