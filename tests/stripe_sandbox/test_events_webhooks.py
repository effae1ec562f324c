"""Events for every state change, and webhook deliveries signed as Stripe signs them."""

import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import Receiver, paid_charge, wait_until

SECRET = "whsec_sandbox_tests"


def test_every_state_change_emits_its_event(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    sandbox.set_refund_status(refund.id, "pending")
    sandbox.set_refund_status(refund.id, "failed", "declined")
    dispute = sandbox.open_dispute(charge_id)
    client.v1.disputes.update(
        dispute["id"], params={"evidence": {"uncategorized_text": "x"}, "submit": True}
    )
    sandbox.set_dispute_status(dispute["id"], "won")
    types = [e.type for e in client.v1.events.list(params={"limit": 100}).data]
    assert list(reversed(types)) == [
        "payment_intent.created",
        "charge.succeeded",
        "payment_intent.succeeded",
        "refund.created",
        "charge.refunded",
        "refund.updated",
        "charge.refund.updated",
        "refund.updated",
        "charge.refund.updated",
        "refund.failed",
        "charge.dispute.created",
        "charge.dispute.funds_withdrawn",
        "charge.dispute.updated",
        "charge.dispute.closed",
        "charge.dispute.funds_reinstated",
    ]


def test_event_carries_the_object_and_the_request(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 100, "metadata": {"vouch_leg": "l1"}},
        options={"idempotency_key": "erf_9:l1"},
    )
    event = client.v1.events.list(params={"type": "refund.created"}).data[0]
    assert event.id.startswith("evt_")
    assert event.data.object.id == refund.id
    assert event.data.object.metadata.vouch_leg == "l1"
    assert event.request.idempotency_key == "erf_9:l1"
    assert event.request.id == refund.last_response.request_id
    assert client.v1.events.retrieve(event.id).id == event.id
    charge_event = client.v1.events.list(params={"type": "charge.refunded"}).data[0]
    assert charge_event.data.previous_attributes.amount_refunded == 0
    assert charge_event.data.object.amount_refunded == 100


def test_event_list_filters_by_type_types_and_created(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    sandbox.advance_clock(100)
    client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    now = sandbox.state()["now"]
    newer = client.v1.events.list(params={"created": {"gte": int(now) - 10}}).data
    assert sorted(e.type for e in newer) == ["charge.refunded", "refund.created"]
    older = client.v1.events.list(params={"created": {"lt": int(now) - 10}}).data
    assert "refund.created" not in [e.type for e in older]
    both = client.v1.events.list(params={"types": ["refund.created", "charge.succeeded"]}).data
    assert [e.type for e in both] == ["refund.created", "charge.succeeded"]
    assert [e.type for e in client.v1.events.list(params={"type": "refund.*"}).data] == [
        "refund.created"
    ]


def test_webhook_deliveries_verify_with_the_sdk(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.add_webhook(receiver.url, SECRET)
    charge_id = paid_charge(client, 1000)
    client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    wait_until(lambda: len(receiver.deliveries) == 5, what="five deliveries")
    for body, headers in receiver.deliveries:
        event = stripe.Webhook.construct_event(body.decode(), headers["Stripe-Signature"], SECRET)
        assert event.id.startswith("evt_")
    assert [e["type"] for e in receiver.events()] == [
        "payment_intent.created",
        "charge.succeeded",
        "payment_intent.succeeded",
        "refund.created",
        "charge.refunded",
    ]
    body, headers = receiver.deliveries[0]
    tampered = body.replace(b"payment_intent", b"payment_intenT", 1)
    try:
        stripe.Webhook.construct_event(tampered.decode(), headers["Stripe-Signature"], SECRET)
        raise AssertionError("a tampered payload verified")
    except stripe.SignatureVerificationError:
        pass
    wait_until(
        lambda: all(e.pending_webhooks == 0 for e in client.v1.events.list().data),
        what="pending_webhooks to reach 0",
    )


def test_failed_deliveries_are_retried_with_backoff_then_given_up(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    receiver.statuses = [500, 503]
    sandbox.add_webhook(receiver.url, SECRET, max_attempts=3, backoff_ms=20)
    paid_charge(client)
    wait_until(lambda: sandbox.webhooks()["endpoints"][0]["delivered"] == 3, what="3 deliveries")
    endpoint = sandbox.webhooks()["endpoints"][0]
    assert (endpoint["delivered"], endpoint["failed_attempts"], endpoint["gave_up"]) == (3, 2, 0)
    log = endpoint["deliveries"]
    failed = {d["event"] for d in log if d["status"] != 200}
    assert len(failed) == 2
    for event_id in failed:  # each failed delivery was tried again, and then arrived
        assert [d["status"] for d in log if d["event"] == event_id] == [500, 200] or [
            d["status"] for d in log if d["event"] == event_id
        ] == [503, 200]
    assert len({e["id"] for e in receiver.events()}) == 3

    receiver.statuses = [500] * 100
    client.v1.refunds.create(params={"charge": paid_charge(client), "amount": 1})
    wait_until(
        lambda: sandbox.webhooks()["endpoints"][0]["gave_up"] >= 1, what="a delivery given up"
    )
    stats = sandbox.webhooks()["endpoints"][0]
    attempts = [d["attempt"] for d in stats["deliveries"] if d["status"] == 500]
    assert max(attempts) == 3  # bounded: never a fourth attempt


def test_duplicate_deliveries(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.add_webhook(receiver.url, SECRET)
    sandbox.webhook_behaviour(duplicate_probability=1.0)
    paid_charge(client)
    wait_until(lambda: len(receiver.deliveries) == 6, what="each of 3 events twice")
    ids = [e["id"] for e in receiver.events()]
    assert len(set(ids)) == 3
    assert all(ids.count(i) == 2 for i in ids)


def test_reordered_deliveries(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.add_webhook(receiver.url, SECRET)
    sandbox.webhook_behaviour(reorder=True, delay_ms=300)
    paid_charge(client)
    wait_until(lambda: len(receiver.deliveries) == 3, what="three deliveries")
    assert [e["type"] for e in receiver.events()] == [
        "payment_intent.succeeded",
        "charge.succeeded",
        "payment_intent.created",
    ]


def test_endpoint_given_on_the_command_line_survives_reset(receiver: Receiver) -> None:
    from stripe_sandbox import SandboxServer

    with SandboxServer(port=0, webhook_url=receiver.url, webhook_secret=SECRET) as server:
        control = SandboxControl(server.url)
        control.reset()
        local = stripe.StripeClient(
            "sk_test_x", base_addresses={"api": server.url}, max_network_retries=0
        )
        paid_charge(local)
        wait_until(lambda: len(receiver.deliveries) == 3, what="three deliveries")
