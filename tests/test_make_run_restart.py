"""A `make run` restart (issue 41 item 1): Vouch stopped and started again with the same var
directory, on the same ports, keeps the demo buyer signed in (the session cookie still works: the
demo users' passwords are not set again) and keeps what was made before, in Vouch and in the
Stripe sandbox alike."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import stripe

from tests import test_smoke_run
from tests.helpers import free_port, wait_until
from tests.test_make_run_concurrency import ENVELOPES, REQUEST_TIMEOUT_S, Buyer
from tests.test_smoke_run import make_run


def _same_ports_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """make_run takes a web port and a sandbox port from free_port: the same two at each start,
    as a person restarting `make run` gets."""
    ports = [free_port(), free_port()]

    def cycle() -> Iterator[int]:
        while True:
            yield from ports

    monkeypatch.setattr(test_smoke_run, "free_port", cycle().__next__)


def test_a_restart_keeps_sessions_and_the_sandboxs_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    var_dir = tmp_path / "var"
    _same_ports_twice(monkeypatch)
    with make_run(var_dir, noreload=True) as run:
        buyer = Buyer(run.base, 0)
        buyer.login()
        created = buyer.post(
            "create", ENVELOPES, {"amount_micro": 5_000_000, "payment_method": "pm_card_visa"}
        )
        assert created.status in (200, 201, 202), created
        envelope_id = created.data["data"]["envelope_id"]

        def leg_paid() -> bool:
            answer = buyer.http.get(f"{run.base}{ENVELOPES}/{envelope_id}", timeout=30)
            legs = answer.json()["data"]["funding_legs"]
            return bool(legs) and legs[0]["payment_intent"] is not None

        wait_until(leg_paid, timeout=60, what="the funding leg's payment")
        before = buyer.http.get(f"{run.base}{ENVELOPES}/{envelope_id}", timeout=30).json()
        (leg,) = before["data"]["funding_legs"]
        first_base, first_sandbox = run.base, run.sandbox_url

    with make_run(var_dir, noreload=True) as run:
        assert (run.base, run.sandbox_url) == (first_base, first_sandbox)
        # The same session cookie, sent again: still the buyer.
        me = buyer.http.get(f"{run.base}/api/v1/me", timeout=REQUEST_TIMEOUT_S)
        assert me.status_code == 200, me.text[:500]
        assert me.json()["data"]["username"] == "buyer"
        after = buyer.http.get(f"{run.base}{ENVELOPES}/{envelope_id}", timeout=30)
        assert after.status_code == 200, after.text[:500]
        (kept,) = after.json()["data"]["funding_legs"]
        assert (kept["funding_id"], kept["payment_intent"], kept["amount_micro"]) == (
            leg["funding_id"],
            leg["payment_intent"],
            5_000_000,
        )
        # The sandbox kept the payment Vouch names.
        sandbox = stripe.StripeClient(
            "sk_test_vouch_sandbox", base_addresses={"api": run.sandbox_url}, max_network_retries=0
        )
        payment = sandbox.v1.payment_intents.retrieve(leg["payment_intent"])
        assert (payment.amount, payment.status) == (500, "succeeded")
        # And a signed-in buyer can still move money after the restart.
        again = buyer.post(
            "top-up",
            f"{ENVELOPES}/{envelope_id}/top-ups",
            {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"},
        )
        assert again.status in (200, 201, 202), again
