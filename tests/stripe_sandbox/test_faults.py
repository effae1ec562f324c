"""Fault injection, readback lag, rate limiting, the clock and reset: each fault kind strikes the
route it targets (the sandbox counts its hits) and does what it says."""

import pytest
import requests
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge


def _hits(sandbox: SandboxControl) -> list[int]:
    return [f["hits"] for f in sandbox.state()["faults"]]


def test_server_error_applies_nothing(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST", times=1, should_retry=True)
    with pytest.raises(stripe.APIError) as raised:
        client.v1.refunds.create(
            params={"charge": charge_id, "amount": 100}, options={"idempotency_key": "k"}
        )
    assert raised.value.http_status == 500
    assert raised.value.headers["Stripe-Should-Retry"] == "true"
    assert sandbox.state()["charges"][charge_id]["refunds"] == 0
    # Nothing was stored under the key: the retry executes.
    retry = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 100}, options={"idempotency_key": "k"}
    )
    assert retry.last_response.headers.get("Idempotent-Replayed") is None
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1
    assert _hits(sandbox) == [1]


IDEMPOTENCY_PAGE = "https://docs.stripe.com/api/idempotent_requests"


def _two_500s(client: stripe.StripeClient, params: dict, key: str) -> list[stripe.APIError]:
    errors = []
    for _ in range(2):
        with pytest.raises(stripe.APIError) as raised:
            client.v1.refunds.create(params=params, options={"idempotency_key": key})
        errors.append(raised.value)
    return errors


@pytest.mark.stripe_behaviour(
    "A 500 after the endpoint began executing is saved under the key and replayed to a retry "
    "(here: the effect was applied)",
    source=IDEMPOTENCY_PAGE,
)
def test_apply_then_error_applies_and_replays_its_500(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "apply_then_error", method="POST", times=1)
    params = {"charge": charge_id, "amount": 100}
    first, retry = _two_500s(client, params, "ate-1")
    assert (first.http_status, first.error.type) == (500, "api_error")
    assert first.headers.get("Idempotent-Replayed") is None
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["Original-Request"] == first.request_id
    assert retry.http_body == first.http_body
    # Applied once, whatever the answers said; the fault struck once, the replay is the key's.
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1
    assert client.v1.refunds.list(params={"charge": charge_id}).data[0].amount == 100
    assert _hits(sandbox) == [1]


@pytest.mark.stripe_behaviour(
    "A 500 after the endpoint began executing is saved under the key and replayed to a retry "
    "(here: nothing was applied)",
    source=IDEMPOTENCY_PAGE,
)
def test_error_after_begin_applies_nothing_and_replays_its_500(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "error_after_begin", method="POST", times=1)
    params = {"charge": charge_id, "amount": 100}
    first, retry = _two_500s(client, params, "eab-1")
    assert first.http_status == 500
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.http_body == first.http_body
    assert sandbox.state()["charges"][charge_id]["refunds"] == 0
    # Only a new key runs the request again.
    assert (
        client.v1.refunds.create(params=params, options={"idempotency_key": "eab-2"}).amount == 100
    )
    assert _hits(sandbox) == [1]


def test_rate_limit_fault(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    sandbox.add_fault("/v1/charges/*", "rate_limit", method="GET", times=2, retry_after_s=1)
    charge_id = paid_charge(client)
    for _ in range(2):
        with pytest.raises(stripe.RateLimitError) as raised:
            client.v1.charges.retrieve(charge_id)
        assert raised.value.http_status == 429
        assert raised.value.headers["Retry-After"] == "1"
    assert client.v1.charges.retrieve(charge_id).id == charge_id
    assert _hits(sandbox) == [2]


def test_timeout_applies_nothing(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", times=1, delay_ms=1200)
    with pytest.raises(stripe.APIConnectionError):
        client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    assert sandbox.state()["charges"][charge_id]["refunds"] == 0
    assert _hits(sandbox) == [1]


def test_apply_then_drop_applies_and_loses_the_answer(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    params = {"charge": charge_id, "amount": 100}
    with pytest.raises(stripe.APIConnectionError):
        client.v1.refunds.create(params=params, options={"idempotency_key": "drop-1"})
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1
    replay = client.v1.refunds.create(params=params, options={"idempotency_key": "drop-1"})
    assert replay.last_response.headers["Idempotent-Replayed"] == "true"
    assert sandbox.state()["charges"][charge_id]["refunds"] == 1
    assert client.v1.refunds.list(params={"charge": charge_id}).data[0].id == replay.id
    assert _hits(sandbox) == [1]


def test_delay_answers_late_but_answers(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/charges/*", "delay", method="GET", delay_ms=100)
    assert client.v1.charges.retrieve(charge_id).id == charge_id
    assert client.v1.charges.retrieve(charge_id).id == charge_id
    assert _hits(sandbox) == [2]


@pytest.mark.parametrize(
    ("error_code", "error_class", "status"),
    [
        ("charge_disputed", stripe.InvalidRequestError, 400),
        ("card_declined", stripe.CardError, 402),
    ],
)
def test_refuse_answers_a_definite_refusal(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    error_code: str,
    error_class: type,
    status: int,
) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "refuse", method="POST", error_code=error_code)
    with pytest.raises(error_class) as raised:
        client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    assert (raised.value.http_status, raised.value.code) == (status, error_code)
    assert sandbox.state()["charges"][charge_id]["refunds"] == 0


def test_faults_match_method_and_path_and_can_be_cleared(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    client.v1.refunds.create(params={"charge": charge_id, "amount": 1})  # POST: not struck
    with pytest.raises(stripe.APIError):
        client.v1.refunds.list()
    sandbox.clear_faults()
    assert len(client.v1.refunds.list().data) == 1


def test_probability_strikes_some(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    charge_id = paid_charge(client)
    sandbox.add_fault("/v1/charges/*", "server_error", method="GET", probability=0.5)
    outcomes = []
    for _ in range(40):
        try:
            client.v1.charges.retrieve(charge_id)
            outcomes.append("ok")
        except stripe.APIError:
            outcomes.append("fault")
    assert 5 < outcomes.count("fault") < 35
    assert _hits(sandbox) == [outcomes.count("fault")]


@pytest.mark.parametrize(
    "body",
    [
        {"path": "/v1/refunds", "kind": "explode"},
        {"kind": "delay"},
        {"path": "/x", "kind": "delay", "times": 0},
    ],
)
def test_bad_fault_specs_are_refused(sandbox: SandboxControl, body: dict) -> None:
    with pytest.raises(RuntimeError, match="400"):
        sandbox.call("POST", "faults", body)
    assert sandbox.faults() == []


def test_readback_lag_hides_new_objects_from_reads(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client)
    sandbox.advance_clock(10)
    sandbox.readback_lag(5000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.retrieve(refund.id)
    assert (raised.value.http_status, raised.value.code) == (404, "resource_missing")
    assert client.v1.refunds.list(params={"charge": charge_id}).data == []
    assert client.v1.charges.retrieve(charge_id).id == charge_id  # old objects still read
    sandbox.advance_clock(5)
    assert client.v1.refunds.retrieve(refund.id).id == refund.id


def test_reset_forgets_everything(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    paid_charge(client)
    sandbox.add_fault("/v1/x", "delay")
    sandbox.readback_lag(10)
    sandbox.advance_clock(3600)
    sandbox.reset()
    state = sandbox.state()
    assert set(state["counts"].values()) == {0}
    assert state["faults"] == []
    assert (state["readback_lag_ms"], state["clock_offset_s"]) == (0, 0.0)
    assert client.v1.charges.list().data == []


def test_clock_moves_created_times(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    before = client.v1.charges.retrieve(paid_charge(client)).created
    sandbox.advance_clock(86_400)
    after = client.v1.charges.retrieve(paid_charge(client)).created
    assert after - before >= 86_400
    with pytest.raises(RuntimeError, match="400"):
        sandbox.advance_clock(-5)


@pytest.mark.parametrize("body", [b"not json", b"[1]"])
def test_control_api_refuses_bad_json(sandbox: SandboxControl, body: bytes) -> None:
    response = requests.post(f"{sandbox.url}/_sandbox/faults", data=body, timeout=5)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "sandbox_error"
