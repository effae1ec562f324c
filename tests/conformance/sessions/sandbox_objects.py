"""Run in a pytest session of its own by tests/conformance/test_session.py (never collected by
the suite: not named test_*.py). The test passes by itself; the session's exit status is the
conformance plugin's verdict on the objects the sandbox answered. CONFORMANCE_CASE picks the
case: "missing" makes the sandbox's refunds lack `currency`, which stripe.Refund declares."""

import os
from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from stripe_sandbox.state import State
from tests.helpers import paid_charge


def test_a_refund_is_read_back(sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch) -> None:
    client = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    if os.environ.get("CONFORMANCE_CASE") == "missing":
        shown = State.render

        def without_currency(self: State, obj: dict[str, Any]) -> dict[str, Any]:
            rendered = shown(self, obj)
            if rendered.get("object") == "refund":
                del rendered["currency"]  # as answered; the stored refund keeps it
            return rendered

        monkeypatch.setattr(State, "render", without_currency)
    charge = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge, "amount": 100})
    assert client.v1.refunds.retrieve(refund.id).id == refund.id
