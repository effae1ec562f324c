"""Links from a provider id to the object in the Stripe Dashboard (SPEC §10): the test-mode path
for a test key, the live path for a live key, and under the Stripe sandbox (`make run`:
`settings.STRIPE_USES_SANDBOX`) the sandbox's own read-only page of the object at the address
`STRIPE_API_BASE` names, since the Dashboard knows none of the sandbox's objects. One place, so
every admin page and template links the same way."""

from django.conf import settings
from django.utils.html import format_html
from django.utils.safestring import SafeString

DASHBOARD = "https://dashboard.stripe.com"
# The sandbox's page of one object (stripe_sandbox/object_view.py; `core` imports no sandbox code).
SANDBOX_OBJECT_PATH = "/_sandbox/objects/"

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


def uses_sandbox() -> bool:
    return bool(getattr(settings, "STRIPE_USES_SANDBOX", False))


def stripe_dashboard_url(provider_id: str | None) -> str | None:
    """The Dashboard address of `provider_id` (under the sandbox: the sandbox's page of it), or
    None for an id that is not Stripe's."""
    if not provider_id:
        return None
    for prefix, path in sorted(_PATHS.items(), key=lambda item: -len(item[0])):
        if provider_id.startswith(prefix):
            if uses_sandbox():
                base = str(settings.STRIPE_API_BASE).rstrip("/")
                return f"{base}{SANDBOX_OBJECT_PATH}{provider_id}"
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
    title = "Open in the Stripe sandbox" if uses_sandbox() else "Open in the Stripe Dashboard"
    return format_html(
        '<a class="vouch-mono vouch-stripe" href="{}" target="_blank" rel="noopener noreferrer" '
        'title="{}">{}&nbsp;↗</a>',
        url,
        title,
        provider_id,
    )
