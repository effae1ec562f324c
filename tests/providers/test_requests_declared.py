"""What the adapter sends is what the pinned SDK declares for that call (SPEC §12.1): captured
from the adapter's own HTTP client on its way to the sandbox, decoded as Stripe decodes it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
import stripe
from stripe.params import PaymentIntentCreateParams

from providers import StripeProvider
from providers.stripe_provider import RetryPolicy
from stripe_sandbox.client import SandboxControl
from stripe_sandbox.params import decode_form

agents: list[str] = []  # the User-Agent of each request recorded by `sent`


def _declared(params_type: Any) -> set[str]:
    options = set(stripe.RequestOptions.__annotations__)
    return set(params_type.__annotations__) - options


@pytest.fixture
def sent(sandbox: SandboxControl) -> tuple[StripeProvider, list[tuple[str, str, dict[str, Any]]]]:
    """A provider whose every request is recorded (method, path, decoded form) as it is sent."""
    provider = StripeProvider(
        api_key="sk_test_vouch_tests",
        api_base=sandbox.url,
        read_timeout_s=2,
        retry=RetryPolicy(max_attempts=1),
    )
    http = provider._client._requestor._client  # the adapter's own transport
    record: list[tuple[str, str, dict[str, Any]]] = []
    original = http.request

    def request(method: str, url: str, headers: Any, post_data: Any = None) -> Any:
        parts = urlsplit(url)
        body = post_data.decode() if isinstance(post_data, bytes) else (post_data or parts.query)
        record.append((method.upper(), parts.path, decode_form(body)))
        return original(method, url, headers, post_data)

    http.request = request  # type: ignore[method-assign]
    return provider, record


def test_payment_create_sends_only_what_payment_intent_create_params_declares(
    sent: tuple[StripeProvider, list[tuple[str, str, dict[str, Any]]]],
) -> None:
    provider, record = sent
    provider.payment_create(
        amount_cents=1000,
        currency="usd",
        payment_method="pm_card_visa",
        idempotency_key="env_c:fund:1",
        metadata={"vouch_envelope": "env_c"},
    )
    [(method, path, params)] = record
    assert (method, path) == ("POST", "/v1/payment_intents")
    undeclared = sorted(set(params) - _declared(PaymentIntentCreateParams))
    assert undeclared == [], f"not in PaymentIntentCreateParams: {undeclared}"
    assert params["allowed_payment_method_types"] == ["card"]


def test_a_key_stripe_would_refuse_is_never_sent(
    sent: tuple[StripeProvider, list[tuple[str, str, dict[str, Any]]]],
) -> None:
    """Stripe takes idempotency keys of up to 255 characters and refuses longer ones: a key is
    made from our rows, so a longer one is our bug, raised before anything is sent."""
    provider, record = sent
    with pytest.raises(ValueError, match="1 to 255"):
        provider.refund_create(
            charge="ch_x", amount_cents=100, idempotency_key="k" * 256, metadata={}
        )
    assert record == []


def test_the_adapter_names_itself_on_its_own_requests_only(
    sent: tuple[StripeProvider, list[tuple[str, str, dict[str, Any]]]],
    sandbox: SandboxControl,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stripe's app info ("Vouch/<version> (url)") ends the User-Agent of the adapter's requests,
    which is how the sandbox's conformance record knows them; another SDK client of the same
    process does not carry it (`stripe.set_app_info` would have marked every one)."""
    provider, _ = sent
    agents.clear()
    sending = stripe.RequestsClient._request_internal  # what goes on the wire, headers included

    def on_the_wire(self: Any, method: str, url: str, headers: Any, *args: Any, **kw: Any) -> Any:
        agents.append(str(headers.get("User-Agent")))
        return sending(self, method, url, headers, *args, **kw)

    monkeypatch.setattr(stripe.RequestsClient, "_request_internal", on_the_wire)
    provider.charge_read("ch_missing")
    assert len(agents) == 1
    assert agents[0].startswith("Stripe/v1 PythonBindings/")
    assert agents[0].endswith("Vouch/0.1.0 (https://github.com/vouch/vouch)")
    assert stripe.app_info is None
