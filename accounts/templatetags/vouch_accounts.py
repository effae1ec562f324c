"""Template tags of the public pages (home, sign-in, sign-up)."""

from typing import Any

from allauth.account.adapter import get_adapter
from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def signup_open(context: dict[str, Any]) -> bool:
    """Whether buyers may sign up now (accounts.adapter.AccountAdapter.is_open_for_signup)."""
    request = context.get("request")
    return request is not None and bool(get_adapter(request).is_open_for_signup(request))
