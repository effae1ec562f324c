"""PaymentIntents and charges through the official SDK."""

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import CARD_ONLY, paid_charge

REMOVED = (
    "https://docs.stripe.com/changelog/endive/2026-09-30/"
    "removes-the-payment-method-types-parameter-from-payment-intents-and-setup-intents"
)
ALLOWED = (
    "https://docs.stripe.com/changelog/dahlia/2026-07-29/allowed-payment-method-types-parameter"
)
DYNAMIC = "https://docs.stripe.com/changelog/2023-08-16/automatic-payment-methods"


@pytest.mark.parametrize(
    ("pm", "brand", "last4"),
    [
        ("pm_card_visa", "visa", "4242"),
        ("pm_card_mastercard", "mastercard", "4444"),
        ("pm_card_amex", "amex", "8431"),
        ("pm_card_visa_debit", "visa", "5556"),
        ("pm_card_discover", "discover", "1117"),
    ],
)
def test_confirmed_payment_intent_succeeds_with_a_charge(
    client: stripe.StripeClient, pm: str, brand: str, last4: str
) -> None:
    pi = client.v1.payment_intents.create(
        params={
            "amount": 1234,
            "currency": "usd",
            "payment_method": pm,
            "confirm": True,
            "metadata": {"vouch_envelope": "env_1"},
            **CARD_ONLY,
        }
    )
    assert (pi.status, pi.amount, pi.amount_received, pi.currency) == (
        "succeeded",
        1234,
        1234,
        "usd",
    )
    assert isinstance(pi.latest_charge, str)
    assert pi.latest_charge.startswith("ch_")
    charge = client.v1.charges.retrieve(pi.latest_charge)
    assert charge.status == "succeeded"
    assert charge.paid is True
    assert charge.captured is True
    assert (charge.amount, charge.amount_captured, charge.amount_refunded) == (1234, 1234, 0)
    assert (charge.refunded, charge.disputed) == (False, False)
    assert charge.payment_intent == pi.id
    assert charge.metadata.to_dict() == {"vouch_envelope": "env_1"}
    assert (charge.payment_method_details.card.brand, charge.payment_method_details.card.last4) == (
        brand,
        last4,
    )
    assert client.v1.payment_intents.retrieve(pi.id).status == "succeeded"


def test_charges_listed_by_payment_intent(client: stripe.StripeClient) -> None:
    first = paid_charge(client)
    other = paid_charge(client)
    pi_id = client.v1.charges.retrieve(first).payment_intent
    listed = client.v1.charges.list(params={"payment_intent": pi_id})
    assert [c.id for c in listed.data] == [first]
    assert other not in [c.id for c in listed.data]


def test_payment_intent_without_confirm_waits_then_confirms(client: stripe.StripeClient) -> None:
    pi = client.v1.payment_intents.create(
        params={"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", **CARD_ONLY}
    )
    assert pi.status == "requires_confirmation"
    assert pi.latest_charge is None
    confirmed = client.v1.payment_intents.confirm(pi.id)
    assert confirmed.status == "succeeded"


@pytest.mark.parametrize(
    ("pm", "code", "decline_code"),
    [
        ("pm_card_chargeDeclined", "card_declined", "generic_decline"),
        ("pm_card_chargeDeclinedInsufficientFunds", "card_declined", "insufficient_funds"),
        ("pm_card_chargeDeclinedExpiredCard", "expired_card", "expired_card"),
    ],
)
def test_declined_cards_give_stripe_card_errors(
    client: stripe.StripeClient, sandbox: SandboxControl, pm: str, code: str, decline_code: str
) -> None:
    with pytest.raises(stripe.CardError) as raised:
        client.v1.payment_intents.create(
            params={
                "amount": 1000,
                "currency": "usd",
                "payment_method": pm,
                "confirm": True,
                **CARD_ONLY,
            }
        )
    error = raised.value
    assert error.http_status == 402
    assert error.code == code
    assert error.error.decline_code == decline_code
    assert error.error.type == "card_error"
    pi = error.error.payment_intent
    assert pi.status == "requires_payment_method"
    assert pi.last_payment_error.decline_code == decline_code
    charge = client.v1.charges.retrieve(error.error.charge)
    assert (charge.status, charge.paid, charge.failure_code) == ("failed", False, code)
    charges = sandbox.state()["charges"]
    assert [c["status"] for c in charges.values()] == ["failed"]


def test_refund_of_a_failed_charge_is_refused(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.CardError) as raised:
        client.v1.payment_intents.create(
            params={
                "amount": 1000,
                "currency": "usd",
                "payment_method": "pm_card_chargeDeclined",
                "confirm": True,
                **CARD_ONLY,
            }
        )
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.refunds.create(params={"charge": raised.value.error.charge})
    assert refused.value.code == "charge_not_refundable"


@pytest.mark.parametrize(
    ("params", "param", "code"),
    [
        (
            {"amount": 1000, "currency": "usd", "payment_method": "pm_nope"},
            "payment_method",
            "resource_missing",
        ),
        ({"amount": 10, "currency": "usd"}, "amount", "amount_too_small"),
        ({"currency": "usd"}, "amount", "parameter_missing"),
        ({"amount": "ten", "currency": "usd"}, "amount", "parameter_invalid_integer"),
        ({"amount": 1000}, "currency", "parameter_missing"),
        ({"amount": 1000, "currency": "usd", "colour": "blue"}, "colour", "parameter_unknown"),
    ],
)
def test_bad_payment_parameters_are_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, params: dict, param: str, code: str
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.payment_intents.create(params=params)
    assert (raised.value.http_status, raised.value.param, raised.value.code) == (400, param, code)
    assert sandbox.state()["counts"]["payment_intents"] == 0


def test_unknown_objects_are_404_resource_missing(client: stripe.StripeClient) -> None:
    for retrieve in (
        client.v1.payment_intents.retrieve,
        client.v1.charges.retrieve,
        client.v1.refunds.retrieve,
        client.v1.disputes.retrieve,
        client.v1.events.retrieve,
        client.v1.files.retrieve,
    ):
        with pytest.raises(stripe.InvalidRequestError) as raised:
            retrieve("xx_missing")
        assert (raised.value.http_status, raised.value.code) == (404, "resource_missing")


@pytest.mark.parametrize("key", ["", "sk_live_abcdefghijklmnop", "pk_test_abcdefghijkl"])
def test_only_test_secret_keys_are_accepted(sandbox: SandboxControl, key: str) -> None:
    bad = stripe.StripeClient(
        key or "sk_test_placeholder", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    if not key:
        bad = stripe.StripeClient(
            "sk_test_placeholder",
            base_addresses={"api": sandbox.url},
            max_network_retries=0,
            http_client=_NoAuthClient(),
        )
    with pytest.raises(stripe.AuthenticationError) as raised:
        bad.v1.charges.list()
    assert raised.value.http_status == 401


class _NoAuthClient(stripe.RequestsClient):
    """Drops the Authorization header, as a caller who forgot the key would."""

    def request(self, method, url, headers, post_data=None):  # type: ignore[no-untyped-def]
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        return super().request(method, url, headers, post_data)


def test_unknown_route_is_stripe_404(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.raw_request("get", "/v1/nonsense")
    assert raised.value.http_status == 404
    assert "Unrecognized request URL" in str(raised.value)


# --- which payment methods a PaymentIntent takes (API 2026-10-28.endive) ------------------------


@pytest.mark.stripe_behaviour(
    "payment_method_types is no longer writable on PaymentIntents: 400 "
    "payment_method_types_no_longer_supported",
    source=REMOVED,
)
def test_payment_method_types_is_refused_as_removed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.payment_intents.create(
            params={"amount": 1000, "currency": "usd", "payment_method_types": ["card"]}
        )
    assert (raised.value.http_status, raised.value.code) == (
        400,
        "payment_method_types_no_longer_supported",
    )
    assert sandbox.state()["counts"]["payment_intents"] == 0
    pi = client.v1.payment_intents.create(
        params={"amount": 1000, "currency": "usd", "payment_method": "pm_card_visa", **CARD_ONLY}
    )
    with pytest.raises(stripe.InvalidRequestError) as on_confirm:
        client.v1.payment_intents.confirm(pi.id, params={"payment_method_types": ["card"]})
    assert on_confirm.value.code == "payment_method_types_no_longer_supported"
    assert client.v1.payment_intents.retrieve(pi.id).status == "requires_confirmation"


@pytest.mark.stripe_behaviour(
    "allowed_payment_method_types is kept on the PaymentIntent and payment_method_types shows "
    "the compatible subset of it",
    source=ALLOWED,
)
def test_allowed_payment_method_types_are_kept_and_filtered(client: stripe.StripeClient) -> None:
    pi = client.v1.payment_intents.create(
        params={
            "amount": 1000,
            "currency": "usd",
            "allowed_payment_method_types": ["card", "wechat_pay"],
        }
    )
    assert pi.allowed_payment_method_types == ["card", "wechat_pay"]
    # The sandbox's account has cards turned on, and nothing else.
    assert pi.payment_method_types == ["card"]
    assert pi.automatic_payment_methods is None
    assert pi.status == "requires_payment_method"


@pytest.mark.stripe_behaviour(
    "allowed_payment_method_types is mutually exclusive with excluded_payment_method_types, "
    "automatic_payment_methods and payment_method_configuration",
    source=ALLOWED,
)
@pytest.mark.parametrize(
    "other",
    [
        {"automatic_payment_methods": {"enabled": True}},
        {"excluded_payment_method_types": ["klarna"]},
        {"payment_method_configuration": "pmc_123"},
    ],
)
def test_allowed_payment_method_types_exclude_the_other_ways(
    client: stripe.StripeClient, sandbox: SandboxControl, other: dict
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.payment_intents.create(
            params={"amount": 1000, "currency": "usd", **CARD_ONLY, **other}
        )
    assert (raised.value.http_status, raised.value.code) == (400, "parameters_exclusive")
    assert "allowed_payment_method_types" in str(raised.value)
    assert sandbox.state()["counts"]["payment_intents"] == 0


@pytest.mark.stripe_behaviour(
    "without a list of payment method types, dynamic payment methods are on "
    "(automatic_payment_methods enabled, redirects allowed)",
    source=DYNAMIC,
)
def test_without_a_list_dynamic_payment_methods_are_on(client: stripe.StripeClient) -> None:
    pi = client.v1.payment_intents.create(params={"amount": 1000, "currency": "usd"})
    assert pi.automatic_payment_methods.to_dict() == {"allow_redirects": "always", "enabled": True}
    assert pi.allowed_payment_method_types is None
    assert pi.payment_method_types == ["card"]
    never = client.v1.payment_intents.create(
        params={
            "amount": 1000,
            "currency": "usd",
            "automatic_payment_methods": {"enabled": True, "allow_redirects": "never"},
        }
    )
    assert never.automatic_payment_methods.allow_redirects == "never"


@pytest.mark.stripe_behaviour(
    "confirming a PaymentIntent with dynamic payment methods needs a return_url, unless "
    "off_session=true or automatic_payment_methods[allow_redirects]=never",
    source=DYNAMIC,
)
def test_confirming_with_dynamic_payment_methods_needs_a_return_url(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    visa = {"amount": 1000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": True}
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.payment_intents.create(params=visa)
    assert raised.value.http_status == 400
    assert "A `return_url` must be specified" in str(raised.value)
    assert sandbox.state()["counts"]["charges"] == 0
    waiting = client.v1.payment_intents.create(params={**visa, "confirm": False})
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.payment_intents.confirm(waiting.id)
    assert client.v1.payment_intents.retrieve(waiting.id).status == "requires_confirmation"
    assert sandbox.state()["counts"]["charges"] == 0

    assert (
        client.v1.payment_intents.confirm(
            waiting.id, params={"return_url": "https://example.com/back"}
        ).status
        == "succeeded"
    )
    never = {"automatic_payment_methods": {"enabled": True, "allow_redirects": "never"}}
    assert client.v1.payment_intents.create(params={**visa, **never}).status == "succeeded"
    assert client.v1.payment_intents.create(params={**visa, "off_session": True}).status == (
        "succeeded"
    )


@pytest.mark.stripe_behaviour(
    "error_on_requires_action cannot be used with dynamic payment methods",
    source=DYNAMIC,
)
def test_error_on_requires_action_needs_a_list_of_payment_method_types(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.payment_intents.create(
            params={
                "amount": 1000,
                "currency": "usd",
                "payment_method": "pm_card_visa",
                "confirm": True,
                "return_url": "https://example.com/back",
                "error_on_requires_action": True,
            }
        )
    assert (raised.value.http_status, raised.value.param) == (400, "error_on_requires_action")
    assert sandbox.state()["counts"]["charges"] == 0


@pytest.mark.stripe_behaviour(
    "PaymentIntents are listed newest first with Stripe's cursors",
    source="https://docs.stripe.com/api/payment_intents/list",
)
def test_payment_intents_are_listed_newest_first(client: stripe.StripeClient) -> None:
    made = [
        client.v1.payment_intents.create(params={"amount": 100 + i, "currency": "usd"}).id
        for i in range(3)
    ]
    listed = client.v1.payment_intents.list(params={"limit": 2})
    assert [pi.id for pi in listed.data] == made[::-1][:2]
    assert listed.has_more is True
    rest = client.v1.payment_intents.list(params={"starting_after": made[1]})
    assert [pi.id for pi in rest.data] == [made[0]]
