"""Dropped webhooks: the event exists at the provider (listed, retrievable) but no endpoint ever
hears of it — the lost delivery that reconciliation's catch-up repairs."""

import pytest
import requests
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import Receiver, paid_charge, wait_until

SECRET = "whsec_sandbox_tests"
DEFAULTS = {"duplicate_probability": 0.0, "reorder": False, "delay_ms": 0, "drop_probability": 0.0}


def _settled(sandbox: SandboxControl) -> bool:
    hooks = sandbox.webhooks()
    return hooks["queued"] == 0 and hooks["in_flight"] == 0


def _listed_event_ids(client: stripe.StripeClient) -> list[str]:
    return [e.id for e in client.v1.events.list(params={"limit": 100}).auto_paging_iter()]


def test_every_dropped_event_is_listed_and_never_delivered(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.add_webhook(receiver.url, SECRET, backoff_ms=10)
    sandbox.webhook_behaviour(drop_probability=1.0)
    charge_id = paid_charge(client, 1000)
    client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    wait_until(lambda: _settled(sandbox), what="the dispatcher to go idle")

    listed = _listed_event_ids(client)
    assert len(listed) == 5
    for event_id in listed:
        event = client.v1.events.retrieve(event_id)
        assert event.pending_webhooks == 1  # never delivered, so still owed
    hooks = sandbox.webhooks()
    assert hooks["dropped"] == 5
    assert sorted(hooks["dropped_events"]) == sorted(listed)
    assert receiver.deliveries == []
    assert hooks["endpoints"][0]["delivered"] == 0


def test_half_the_events_dropped_some_but_not_all(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.reset(seed=7)  # the draws are the sandbox's seeded randomness: the same every run
    sandbox.add_webhook(receiver.url, SECRET, backoff_ms=10)
    sandbox.webhook_behaviour(drop_probability=0.5)
    for _ in range(10):
        paid_charge(client, 1000)
    dropped = set(sandbox.webhooks()["dropped_events"])
    listed = set(_listed_event_ids(client))
    assert len(listed) == 30
    wait_until(lambda: len(receiver.deliveries) == 30 - len(dropped), what="the kept deliveries")
    wait_until(lambda: _settled(sandbox), what="the dispatcher to go idle")

    delivered = {e["id"] for e in receiver.events()}
    assert 0 < len(dropped) < 30
    assert delivered.isdisjoint(dropped)
    assert delivered | dropped == listed
    assert len(receiver.deliveries) == len(delivered)  # dropping does not duplicate


def test_the_answer_is_the_whole_behaviour_in_force(sandbox: SandboxControl) -> None:
    assert sandbox.webhook_behaviour() == DEFAULTS
    assert sandbox.webhook_behaviour(drop_probability=0.25) == {
        **DEFAULTS,
        "drop_probability": 0.25,
    }
    assert sandbox.webhook_behaviour(reorder=True, delay_ms=5) == {
        **DEFAULTS,
        "drop_probability": 0.25,
        "reorder": True,
        "delay_ms": 5,
    }


@pytest.mark.parametrize(
    "body",
    [
        {"drop_probability": 1.5},
        {"drop_probability": -0.1},
        {"drop_probability": "half"},
        {"drop_probability": True},
        {"drop_probability": None},
        {"drop_probability": 0.5, "reorder": "yes"},
        {"drop_probabilty": 0.5},
    ],
)
def test_bad_values_are_refused_and_change_nothing(sandbox: SandboxControl, body: dict) -> None:
    sandbox.webhook_behaviour(duplicate_probability=0.1)
    response = requests.post(f"{sandbox.url}/_sandbox/webhook-behaviour", json=body, timeout=5)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "sandbox_error"
    assert sandbox.webhook_behaviour() == {**DEFAULTS, "duplicate_probability": 0.1}


def test_reset_forgets_the_drop_probability(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.webhook_behaviour(drop_probability=1.0, duplicate_probability=0.5, reorder=True)
    sandbox.reset()
    assert sandbox.webhook_behaviour() == DEFAULTS
    sandbox.add_webhook(receiver.url, SECRET)
    paid_charge(client, 1000)
    wait_until(lambda: len(receiver.deliveries) == 3, what="every event delivered")
    assert sandbox.webhooks()["dropped"] == 0
