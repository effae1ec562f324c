"""Idempotency keys, as Stripe honours them."""

import threading

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge


def test_same_key_same_parameters_replays_the_first_answer(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    params = {"charge": charge_id, "amount": 100, "metadata": {"vouch_leg": "leg_1"}}
    first = client.v1.refunds.create(params=params, options={"idempotency_key": "erf_1:leg_1"})
    second = client.v1.refunds.create(params=params, options={"idempotency_key": "erf_1:leg_1"})
    assert second.id == first.id
    assert second.to_dict() == first.to_dict()
    assert first.last_response.headers.get("Idempotent-Replayed") is None
    assert second.last_response.headers["Idempotent-Replayed"] == "true"
    assert second.last_response.headers["Original-Request"] == first.last_response.request_id
    assert second.last_response.body == first.last_response.body
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1


def test_a_stored_error_replays_too(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 1000)
    params = {"charge": charge_id, "amount": 5000}
    errors = []
    for _ in range(2):
        with pytest.raises(stripe.InvalidRequestError) as raised:
            client.v1.refunds.create(params=params, options={"idempotency_key": "too-much"})
        errors.append(raised.value)
    assert [e.code for e in errors] == ["amount_too_large", "amount_too_large"]
    assert errors[1].headers["Idempotent-Replayed"] == "true"
    assert errors[0].http_body == errors[1].http_body


def test_same_key_other_parameters_is_an_idempotency_error(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    client.v1.refunds.create(
        params={"charge": charge_id, "amount": 100}, options={"idempotency_key": "k1"}
    )
    with pytest.raises(stripe.IdempotencyError) as raised:
        client.v1.refunds.create(
            params={"charge": charge_id, "amount": 101}, options={"idempotency_key": "k1"}
        )
    assert raised.value.http_status == 400
    assert raised.value.error.type == "idempotency_error"
    # The same key on another endpoint is a different request too.
    with pytest.raises(stripe.IdempotencyError):
        client.v1.payment_intents.create(
            params={"amount": 100, "currency": "usd"}, options={"idempotency_key": "k1"}
        )
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1


def test_validation_failures_are_not_stored(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 1000)
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.refunds.create(
            params={"charge": charge_id, "amount": -1}, options={"idempotency_key": "fixme"}
        )
    refund = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 1}, options={"idempotency_key": "fixme"}
    )
    assert refund.amount == 1


def test_same_key_while_the_first_runs_is_409(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    sandbox.add_fault("/v1/refunds", "delay", method="POST", times=1, delay_ms=400)
    params = {"charge": charge_id, "amount": 100}
    slow_client = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    results: list[object] = []
    first = threading.Thread(
        target=lambda: results.append(
            slow_client.v1.refunds.create(params=params, options={"idempotency_key": "busy"})
        )
    )
    first.start()
    try:
        from tests.helpers import wait_until

        wait_until(lambda: sandbox.faults()[0]["hits"] == 1, what="the delayed request to start")
        with pytest.raises(stripe.APIError) as raised:
            client.v1.refunds.create(params=params, options={"idempotency_key": "busy"})
    finally:
        first.join()
    assert raised.value.http_status == 409
    assert raised.value.error.code == "idempotency_key_in_use"
    assert len(results) == 1
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1


def test_keys_expire_after_24_hours_of_sandbox_time(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    client.v1.refunds.create(
        params={"charge": charge_id, "amount": 100}, options={"idempotency_key": "old"}
    )
    sandbox.advance_clock(23 * 3600)
    with pytest.raises(stripe.IdempotencyError):
        client.v1.refunds.create(
            params={"charge": charge_id, "amount": 200}, options={"idempotency_key": "old"}
        )
    sandbox.advance_clock(3601)
    again = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 200}, options={"idempotency_key": "old"}
    )
    assert again.amount == 200
    assert again.last_response.headers.get("Idempotent-Replayed") is None
    assert sandbox.state()["charges"][charge_id]["amount_refunded"] == 300


def test_keys_are_per_api_key(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    charge_id = paid_charge(client, 1000)
    other = stripe.StripeClient(
        "sk_test_other_account", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    client.v1.refunds.create(
        params={"charge": charge_id, "amount": 100}, options={"idempotency_key": "shared"}
    )
    refund = other.v1.refunds.create(
        params={"charge": charge_id, "amount": 200}, options={"idempotency_key": "shared"}
    )
    assert refund.amount == 200
