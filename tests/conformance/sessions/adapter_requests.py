"""Run in a pytest session of its own by tests/conformance/test_session.py (never collected by
the suite: not named test_*.py). Each test passes by itself; what the session's exit status says
is the conformance plugin's verdict on what the adapter sent. CONFORMANCE_CASE picks the case."""

import os

import stripe

from providers import StripeProvider
from providers.stripe_provider import RetryPolicy
from stripe_sandbox.client import SandboxControl


def _provider(sandbox: SandboxControl) -> StripeProvider:
    return StripeProvider(
        api_key="sk_test_vouch_tests", api_base=sandbox.url, retry=RetryPolicy(max_attempts=1)
    )


def test_the_adapter_sends_a_refund(sandbox: SandboxControl) -> None:
    provider = _provider(sandbox)
    paid = provider.payment_create(
        amount_cents=1000,
        currency="usd",
        payment_method="pm_card_visa",
        idempotency_key="conformance-session-1",
        metadata={},
    )
    charge = str(paid.require()["latest_charge"])
    params = {"charge": charge, "amount": 100}
    if os.environ.get("CONFORMANCE_CASE") == "undeclared":
        params["vouch_note"] = "a parameter RefundCreateParams does not declare"

    def create(options: stripe.RequestOptions) -> object:
        return provider._client.v1.refunds.create(params=params, options=options)  # type: ignore[arg-type]

    outcome = provider._call(create, idempotency_key="conformance-session-2")
    assert outcome.accepted or outcome.error_code == "parameter_unknown"
