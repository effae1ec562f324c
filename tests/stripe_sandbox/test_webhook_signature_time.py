"""A moved sandbox clock and webhook signatures (issue 41 item 7).

Stripe signs each delivery attempt with the time of that attempt ("Stripe generates timestamps and
signatures each time we send an event to your endpoint. If Stripe retries an event, we generate a
new signature and timestamp for the new delivery attempt", https://docs.stripe.com/webhooks,
*Prevent replay attacks*), while the event's `created` is when the event happened. The sandbox's
clock stands for the provider's world (objects' and events' `created`); the signature stands for
the delivery, made now. A clock moved 150 days forward left every delivery signed 150 days in the
future, which Vouch (and the SDK) refuse as outside the tolerance."""

import json
import time

import pytest
import stripe
from django.test import Client

from stripe_sandbox.client import SandboxControl
from tests.helpers import Receiver, paid_charge, wait_until
from verification.models import ProviderEvent

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings
DAYS_150 = 150 * 86_400


def _deliveries_after_advance(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> list[tuple[bytes, dict[str, str]]]:
    sandbox.add_webhook(receiver.url, SECRET)
    moved_to = sandbox.advance_clock(DAYS_150)["now"]
    paid_charge(client, 1000)
    wait_until(lambda: len(receiver.deliveries) == 3, what="three deliveries")
    for body, _ in receiver.deliveries:
        # The event itself happened on the sandbox's clock, 150 days on.
        assert json.loads(body)["created"] >= int(moved_to) - 5
    return receiver.deliveries


def test_after_a_clock_advance_deliveries_are_signed_at_the_time_they_are_sent(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    for body, headers in _deliveries_after_advance(client, sandbox, receiver):
        signed_at = int(headers["Stripe-Signature"].split(",")[0].removeprefix("t="))
        assert abs(signed_at - time.time()) < 60
        # The SDK's own check (tolerance 300 s, against the wall clock) accepts it.
        event = stripe.Webhook.construct_event(body.decode(), headers["Stripe-Signature"], SECRET)
        assert event.type in {
            "payment_intent.created",
            "charge.succeeded",
            "payment_intent.succeeded",
        }
    logged = sandbox.webhooks()["endpoints"][0]["deliveries"]
    assert all(abs(entry["at"] - time.time()) < 60 for entry in logged)


@pytest.mark.django_db
def test_vouch_accepts_a_webhook_delivered_after_a_clock_advance(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    deliveries = _deliveries_after_advance(client, sandbox, receiver)
    for body, headers in deliveries:
        response = Client().post(
            "/webhooks/stripe",
            body,
            content_type="application/json",
            HTTP_STRIPE_SIGNATURE=headers["Stripe-Signature"],
        )
        assert response.status_code == 200, response.content
    assert ProviderEvent.objects.count() == 3
