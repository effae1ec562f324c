"""Idempotency's edges as Stripe draws them: a 500 after execution began is stored and replayed
under its key, keys are at most 255 characters, and every error names its request log."""

import re
from collections.abc import Callable
from typing import Any

import pytest
import stripe

from stripe_sandbox import server
from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

IDEMPOTENCY_PAGE = "https://docs.stripe.com/api/idempotent_requests"
LOW_LEVEL_PAGE = "https://docs.stripe.com/error-low-level#idempotency"
ERRORS_PAGE = "https://docs.stripe.com/api/errors"


def _crashing_after(handler: Callable[..., Any]) -> Callable[..., Any]:
    def crashing(*args: Any) -> Any:
        handler(*args)
        raise RuntimeError("a sandbox bug, after the endpoint did its work")

    return crashing


@pytest.mark.stripe_behaviour(
    "Results are saved once an endpoint started executing: a retry with the same key gets the "
    "same result, including a 500 error",
    source=IDEMPOTENCY_PAGE,
)
def test_a_crash_inside_an_endpoint_is_a_500_stored_and_replayed(
    client: stripe.StripeClient, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    charge_id = paid_charge(client, 1000)
    monkeypatch.setattr(
        server,
        "ROUTES",
        [
            (method, regex, pattern, _crashing_after(handler))
            if (method, pattern) == ("POST", "/v1/refunds")
            else (method, regex, pattern, handler)
            for method, regex, pattern, handler in server.ROUTES
        ],
    )
    params = {"charge": charge_id, "amount": 100}
    errors = []
    for _ in range(2):
        with pytest.raises(stripe.APIError) as raised:
            client.v1.refunds.create(params=params, options={"idempotency_key": "crash-1"})
        errors.append(raised.value)
    assert [e.http_status for e in errors] == [500, 500]
    assert errors[0].error.type == "api_error"
    assert errors[0].headers.get("Idempotent-Replayed") is None
    assert errors[1].headers["Idempotent-Replayed"] == "true"
    assert errors[1].headers["Original-Request"] == errors[0].request_id
    assert errors[1].http_body == errors[0].http_body
    # The endpoint ran once: the refund it made is the only one, the retry made none.
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1


@pytest.mark.stripe_behaviour(
    "Idempotency keys are up to 255 characters long; a longer one is refused (400 "
    "idempotency_error) and nothing runs",
    source=IDEMPOTENCY_PAGE,
)
def test_a_key_longer_than_255_characters_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    keys = sandbox.state()["counts"]["idempotency_keys"]
    params = {"charge": charge_id, "amount": 100}
    with pytest.raises(stripe.IdempotencyError) as raised:
        client.v1.refunds.create(params=params, options={"idempotency_key": "k" * 256})
    assert raised.value.http_status == 400
    assert raised.value.error.type == "idempotency_error"
    assert raised.value.error.message.startswith(
        "Idempotent key length is 256 characters long, which is outside accepted lengths. "
        "Idempotent Keys must be 1-255 characters long."
    )
    state = sandbox.state()
    assert state["charges"][charge_id]["refunds"] == 0
    assert state["counts"]["idempotency_keys"] == keys
    refund = client.v1.refunds.create(params=params, options={"idempotency_key": "k" * 255})
    assert refund.amount == 100


def _provoke(
    client: stripe.StripeClient, sandbox: SandboxControl, charge_id: str, what: str
) -> None:
    if what == "over_refund":
        client.v1.refunds.create(params={"charge": charge_id, "amount": 5000})
    elif what == "missing":
        client.v1.refunds.retrieve("re_nothing")
    elif what == "idempotency_error":
        for amount in (1, 2):
            client.v1.refunds.create(
                params={"charge": charge_id, "amount": amount}, options={"idempotency_key": "once"}
            )
    elif what == "unknown_route":
        client.raw_request("get", "/v1/nowhere")
    else:
        sandbox.add_fault("/v1/refunds", "server_error", method="POST", times=1)
        client.v1.refunds.create(params={"charge": charge_id, "amount": 1})


@pytest.mark.stripe_behaviour(
    "An error names its request's entry in the test-mode Dashboard's request log (request_log_url)",
    source=ERRORS_PAGE,
)
@pytest.mark.parametrize(
    "provoke",
    ["over_refund", "missing", "idempotency_error", "unknown_route", "server_error"],
)
def test_every_error_carries_its_request_log_url(
    client: stripe.StripeClient, sandbox: SandboxControl, provoke: str
) -> None:
    charge_id = paid_charge(client, 1000)
    with pytest.raises(stripe.StripeError) as raised:
        _provoke(client, sandbox, charge_id, provoke)
    error = raised.value
    assert error.request_id
    assert error.request_id.startswith("req_")
    url = error.json_body["error"]["request_log_url"]
    match = re.fullmatch(r"https://dashboard\.stripe\.com/test/logs/(req_\w+)\?t=(\d+)", url)
    assert match, url
    assert match.group(1) == error.request_id
    assert abs(int(match.group(2)) - sandbox.call("GET", "clock")["now"]) < 60


def test_a_replayed_error_names_the_first_request_log(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 1000)
    params = {"charge": charge_id, "amount": 5000}
    errors = []
    for _ in range(2):
        with pytest.raises(stripe.InvalidRequestError) as raised:
            client.v1.refunds.create(params=params, options={"idempotency_key": "twice"})
        errors.append(raised.value)
    first, replay = errors
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.request_id != first.request_id
    assert replay.json_body["error"]["request_log_url"].startswith(
        f"https://dashboard.stripe.com/test/logs/{first.request_id}?t="
    )


def test_an_unauthenticated_error_has_no_request_log(sandbox: SandboxControl) -> None:
    """Without a valid key no account is known, so there is no Dashboard log to point at (Stripe's
    401 carries only `type` and `message`)."""
    anonymous = stripe.StripeClient(
        "rk_live_not_a_test_key", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    with pytest.raises(stripe.AuthenticationError) as raised:
        anonymous.v1.charges.list()
    assert "request_log_url" not in raised.value.json_body["error"]
