"""Links from a provider id to the object in the Stripe Dashboard (SPEC §10): the test-mode path
for a test key (and the sandbox), the live path for a live key. One place, so every admin page and
template links the same way."""

from django.conf import settings
from django.utils.html import format_html
from django.utils.safestring import SafeString

DASHBOARD = "https://dashboard.stripe.com"

# The Dashboard's page for each kind of Stripe id, by prefix.
_PATHS: dict[str, str] = {
    "pi_": "payments",
    "ch_": "payments",
    "py_": "payments",
    "re_": "refunds",
    "pyr_": "refunds",
    "dp_": "disputes",
    "du_": "disputes",
    "evt_": "events",
    "cus_": "customers",
    "file_": "files",
    "pm_": "payment_methods",
}


def stripe_mode_is_live() -> bool:
    key = str(getattr(settings, "STRIPE_API_KEY", ""))
    return key.startswith(("sk_live_", "rk_live_"))


def stripe_dashboard_url(provider_id: str | None) -> str | None:
    """The Dashboard address of `provider_id`, or None for an id that is not Stripe's."""
    if not provider_id:
        return None
    for prefix, path in sorted(_PATHS.items(), key=lambda item: -len(item[0])):
        if provider_id.startswith(prefix):
            mode = "" if stripe_mode_is_live() else "/test"
            return f"{DASHBOARD}{mode}/{path}/{provider_id}"
    return None


def stripe_link(provider_id: str | None) -> SafeString | str:
    """The id as a link to the Dashboard (opens in a new tab), or the id as plain text."""
    if not provider_id:
        return "—"
    url = stripe_dashboard_url(provider_id)
    if url is None:
        return format_html('<span class="vouch-mono">{}</span>', provider_id)
    return format_html(
        '<a class="vouch-mono vouch-stripe" href="{}" target="_blank" rel="noopener noreferrer" '
        'title="Open in the Stripe Dashboard">{}&nbsp;↗</a>',
        url,
        provider_id,
    )
