"""`/_sandbox/seed`: many charges, refunds and disputes made at once for benchmarks, without
events, looking exactly like objects made through the API."""

import time
from typing import Any

import pytest
import requests
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import Receiver, paid_charge, wait_until


def _shape(value: Any) -> Any:
    """The structure of a JSON value: dict keys all the way down (but metadata's, which are
    data), the first item of a list."""
    if isinstance(value, dict):
        return {key: None if key == "metadata" else _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return None


def _api_made(client: stripe.StripeClient, sandbox: SandboxControl) -> dict[str, dict]:
    charge_id = paid_charge(client, 10_000)
    refund = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 100, "metadata": {"vouch_leg": "leg_api"}}
    )
    failed = client.v1.refunds.create(params={"charge": charge_id, "amount": 200})
    sandbox.set_refund_status(failed.id, "failed", "declined")
    dispute = sandbox.open_dispute(paid_charge(client, 10_000), reason="fraudulent")
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    return {
        "charge": charge.to_dict(),
        "refund": client.v1.refunds.retrieve(refund.id).to_dict(),
        "failed_refund": client.v1.refunds.retrieve(failed.id).to_dict(),
        "payment_intent": client.v1.payment_intents.retrieve(str(charge.payment_intent)).to_dict(),
        "dispute": client.v1.disputes.retrieve(dispute["id"]).to_dict(),
    }


def test_seeded_objects_look_like_api_made_ones(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    api = _api_made(client, sandbox)
    [seeded] = sandbox.seed(
        [
            {
                "amount": 10_000,
                "currency": "usd",
                "metadata": {"vouch_funding": "fl_1"},
                "refunds": [
                    {"amount": 100, "metadata": {"vouch_leg": "leg_x"}},
                    {"amount": 200, "status": "failed", "failure_reason": "declined"},
                ],
            }
        ]
    )
    [seeded_disputed] = sandbox.seed([{"amount": 10_000, "disputes": [{"reason": "fraudulent"}]}])
    charge = client.v1.charges.retrieve(seeded["id"], params={"expand": ["refunds"]}).to_dict()
    mine = {
        "charge": charge,
        "refund": client.v1.refunds.retrieve(seeded["refunds"][0]).to_dict(),
        "failed_refund": client.v1.refunds.retrieve(seeded["refunds"][1]).to_dict(),
        "payment_intent": client.v1.payment_intents.retrieve(seeded["payment_intent"]).to_dict(),
        "dispute": client.v1.disputes.retrieve(seeded_disputed["disputes"][0]).to_dict(),
    }
    for kind, made in api.items():
        assert set(mine[kind]) == set(made), kind
        assert _shape(mine[kind]) == _shape(made), kind
    assert charge["payment_intent"] == seeded["payment_intent"]
    assert (charge["status"], charge["paid"], charge["captured"]) == ("succeeded", True, True)
    assert (charge["amount_refunded"], charge["refunded"]) == (100, False)
    assert charge["metadata"] == {"vouch_funding": "fl_1"}
    assert [r["id"] for r in charge["refunds"]["data"]] == seeded["refunds"][::-1]
    assert mine["refund"]["metadata"] == {"vouch_leg": "leg_x"}
    assert mine["refund"]["payment_intent"] == seeded["payment_intent"]
    pi = mine["payment_intent"]
    assert (pi["status"], pi["latest_charge"], pi["amount_received"]) == (
        "succeeded",
        seeded["id"],
        10_000,
    )
    assert client.v1.charges.retrieve(seeded_disputed["id"]).disputed is True


def test_seeded_charges_behave_like_api_made_ones(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    [fully, partly] = sandbox.seed(
        [
            {"amount": 1000, "refunds": [{"amount": 600}, {"amount": 400}]},
            {"amount": 1000, "refunds": [{"amount": 300}]},
        ]
    )
    charge = client.v1.charges.retrieve(fully["id"])
    assert (charge.amount_refunded, charge.refunded) == (1000, True)
    with pytest.raises(stripe.InvalidRequestError) as caught:
        client.v1.refunds.create(params={"charge": fully["id"], "amount": 1})
    assert caught.value.code == "charge_already_refunded"
    with pytest.raises(stripe.InvalidRequestError) as caught:
        client.v1.refunds.create(params={"charge": partly["id"], "amount": 701})
    assert caught.value.code == "amount_too_large"
    client.v1.refunds.create(params={"charge": partly["id"], "amount": 700})
    assert client.v1.charges.retrieve(partly["id"]).refunded is True
    state = sandbox.state()["charges"]
    assert state[fully["id"]]["amount_refunded"] == 1000
    assert state[partly["id"]]["amount_refunded"] == 1000


def test_created_from_the_sandbox_clock_or_given(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    now = int(sandbox.advance_clock(3 * 86_400)["now"])
    three_days_ago = now - 3 * 86_400
    [clocked, given] = sandbox.seed(
        [
            {"amount": 1000, "refunds": [{"amount": 1}]},
            {
                "amount": 1000,
                "created": three_days_ago,
                "refunds": [{"amount": 1}, {"amount": 1, "created": three_days_ago + 60}],
            },
        ]
    )
    assert client.v1.charges.retrieve(clocked["id"]).created >= now
    assert client.v1.refunds.retrieve(clocked["refunds"][0]).created >= now
    assert client.v1.charges.retrieve(given["id"]).created == three_days_ago
    assert client.v1.payment_intents.retrieve(given["payment_intent"]).created == three_days_ago
    refunds = [client.v1.refunds.retrieve(r).created for r in given["refunds"]]
    assert refunds == [three_days_ago, three_days_ago + 60]
    old = client.v1.charges.list(params={"created": {"lt": now - 86_400}}).data
    assert [c.id for c in old] == [given["id"]]


def test_seeding_emits_no_event_and_delivers_nothing(
    client: stripe.StripeClient, sandbox: SandboxControl, receiver: Receiver
) -> None:
    sandbox.add_webhook(receiver.url, "whsec_sandbox_tests")
    sandbox.seed([{"amount": 1000, "refunds": [{"amount": 10}]}] * 20)
    assert client.v1.events.list().data == []
    paid_charge(client, 1000)  # the endpoint works: the API's events do arrive
    wait_until(lambda: len(receiver.deliveries) == 3, what="the API charge's events")
    assert {e["type"] for e in receiver.events()} == {
        "payment_intent.created",
        "charge.succeeded",
        "payment_intent.succeeded",
    }
    assert sandbox.state()["counts"]["charges"] == 21


@pytest.mark.parametrize(
    "charges",
    [
        [{"amount": 1000}, {"amount": 10}],  # below Stripe's minimum
        [{"amount": 1000}, {"currency": "usd"}],
        [{"amount": 1000, "refunds": [{"amount": 600}, {"amount": 401}]}],
        [{"amount": 1000, "refunds": [{"amount": 1, "status": "done"}]}],
        [{"amount": 1000, "refunds": [{"amount": 1, "metadata": {"k": 1}}]}],
        [{"amount": 1000, "created": "yesterday"}],
        [{"amount": 1000, "payment_method": "pm_card_chargeDeclined"}],
        [{"amount": 1000, "colour": "red"}],
        "not a list",
    ],
)
def test_a_bad_seed_is_refused_whole(sandbox: SandboxControl, charges: Any) -> None:
    response = requests.post(f"{sandbox.url}/_sandbox/seed", json={"charges": charges}, timeout=5)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "sandbox_error"
    assert sandbox.state()["counts"]["charges"] == 0


def test_five_thousand_charges_and_twenty_thousand_refunds_page_exactly_once(
    sandbox: SandboxControl,
) -> None:
    now = int(sandbox.state()["now"])
    day = 86_400
    started = time.monotonic()
    seeded = sandbox.seed(
        [
            {
                "amount": 10_000,
                "currency": "usd",
                "metadata": {"vouch_funding": f"fl_{i}"},
                "created": now - (i % 10) * day - i,
                "refunds": [
                    {"amount": 100, "metadata": {"vouch_leg": f"leg_{i}_{j}"}} for j in range(4)
                ],
            }
            for i in range(5000)
        ]
    )
    assert time.monotonic() - started < 30  # seconds, not minutes (about one here)
    assert len(seeded) == 5000
    assert sum(len(c["refunds"]) for c in seeded) == 20_000
    counts = sandbox.state()["counts"]
    assert (counts["charges"], counts["refunds"], counts["events"]) == (5000, 20_000, 0)

    # A three-day window, paged as reconciliation pages it (raw HTTP: the SDK's own object
    # building would dominate the time).
    low, high = now - 5 * day, now - 2 * day
    session = requests.Session()
    session.headers["Authorization"] = "Bearer sk_test_seed"
    seen: list[tuple[int, str]] = []
    params: dict[str, Any] = {"limit": 100, "created[gte]": low, "created[lt]": high}
    while True:
        page = session.get(f"{sandbox.url}/v1/refunds", params=params, timeout=10).json()
        seen += [(r["created"], r["id"]) for r in page["data"]]
        if not page["has_more"]:
            break
        params["starting_after"] = page["data"][-1]["id"]
    expected = {
        refund_id
        for i, charge in enumerate(seeded)
        if low <= now - (i % 10) * day - i < high
        for refund_id in charge["refunds"]
    }
    assert len(seen) == len(expected) == 6000
    assert {refund_id for _, refund_id in seen} == expected
    assert [created for created, _ in seen] == sorted((c for c, _ in seen), reverse=True)
