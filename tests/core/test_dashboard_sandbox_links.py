"""Under the Stripe sandbox (`make run`: settings.STRIPE_USES_SANDBOX) a Stripe id links to the
sandbox's own read-only page of the object, at the address STRIPE_API_BASE names, instead of the
Stripe Dashboard, which knows none of the sandbox's objects (issue 41 item 8)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from html import unescape
from typing import Any

import stripe

from core.dashboard import stripe_dashboard_url, stripe_link
from stripe_sandbox.client import SandboxControl


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - the test's sandbox
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def test_a_link_under_the_sandbox_opens_the_sandboxs_view_of_the_object(
    settings: Any, stripe_at_sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    settings.STRIPE_USES_SANDBOX = True
    sandbox = stripe_at_sandbox
    settings.STRIPE_API_BASE = sandbox.url
    intent = sdk.v1.payment_intents.create(
        params={
            "amount": 2000,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "automatic_payment_methods": {"enabled": True, "allow_redirects": "never"},
        }
    )
    charge_id = str(intent.latest_charge)

    url = stripe_dashboard_url(charge_id)
    assert url == f"{sandbox.url}/_sandbox/objects/{charge_id}"
    assert f'href="{url}"' in str(stripe_link(charge_id))
    status, page = fetch(str(url))
    assert status == 200
    assert f"Charge <code>{charge_id}</code>" in page
    assert f'"id": "{charge_id}"' in unescape(page.replace('<a href="', "").replace("</a>", ""))
    # Other ids in it open their own page; the JSON form is the object itself.
    assert f'<a href="/_sandbox/objects/{intent.id}">{intent.id}</a>' in page
    status, body = fetch(f"{url}?format=json")
    assert status == 200
    assert json.loads(body)["id"] == charge_id
    assert json.loads(body)["payment_intent"] == intent.id

    status, page = fetch(f"{sandbox.url}/_sandbox/objects/ch_nothing_here")
    assert status == 404
    assert "No such object" in page


def test_without_the_sandbox_the_link_stays_the_dashboards(settings: Any) -> None:
    settings.STRIPE_USES_SANDBOX = False
    settings.STRIPE_API_KEY = "sk_test_abc"
    assert stripe_dashboard_url("ch_1") == "https://dashboard.stripe.com/test/payments/ch_1"
