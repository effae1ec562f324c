"""3-D Secure: a card that asks for authentication, confirmed server-side, and what follows (the
customer authenticating or not, the PaymentIntent canceled)."""

from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import CARD_ONLY

TEST_CARDS = "https://docs.stripe.com/testing#regulatory-cards"
LIFECYCLE = "https://docs.stripe.com/payments/paymentintents/lifecycle"
ERROR_ON_REQUIRES_ACTION = "https://docs.stripe.com/api/payment_intents/create#create_payment_intent-error_on_requires_action"
CANCEL = "https://docs.stripe.com/api/payment_intents/cancel"
AUTHENTICATION_REQUIRED = ["pm_card_threeDSecure2Required", "pm_card_authenticationRequired"]


def _confirmed(client: stripe.StripeClient, pm: str, **params: Any) -> stripe.PaymentIntent:
    return client.v1.payment_intents.create(
        params={
            "amount": 2000,
            "currency": "usd",
            "payment_method": pm,
            "confirm": True,
            "metadata": {"order": "o1"},
            **CARD_ONLY,
            **params,
        }
    )


def _event_types(client: stripe.StripeClient) -> list[str]:
    return [event.type for event in client.v1.events.list(params={"limit": 100}).data][::-1]


def _authenticate(sandbox: SandboxControl, pi_id: str, outcome: str) -> dict[str, Any]:
    result: dict[str, Any] = sandbox.call(
        "POST", f"payment_intents/{pi_id}/authenticate", {"outcome": outcome}
    )
    return result


@pytest.mark.stripe_behaviour(
    "a card that requires 3-D Secure, confirmed server-side, leaves the PaymentIntent in "
    "requires_action with next_action use_stripe_sdk and no charge",
    source=TEST_CARDS,
)
@pytest.mark.parametrize("pm", AUTHENTICATION_REQUIRED)
def test_a_3d_secure_card_leaves_the_payment_intent_requiring_action(
    client: stripe.StripeClient, sandbox: SandboxControl, pm: str
) -> None:
    pi = _confirmed(client, pm)
    assert (pi.status, pi.amount_received, pi.latest_charge) == ("requires_action", 0, None)
    assert pi.next_action.type == "use_stripe_sdk"
    assert pi.next_action.use_stripe_sdk is not None
    assert pi.last_payment_error is None
    assert client.v1.charges.list(params={"payment_intent": pi.id}).data == []
    assert sandbox.state()["counts"]["charges"] == 0
    assert _event_types(client) == ["payment_intent.created", "payment_intent.requires_action"]
    assert client.v1.payment_intents.retrieve(pi.id).status == "requires_action"


@pytest.mark.stripe_behaviour(
    "confirmed with a return_url, a 3-D Secure card's next_action is redirect_to_url",
    source="https://docs.stripe.com/payments/3d-secure/authentication-flow#manual-redirect",
)
def test_with_a_return_url_the_next_action_is_a_redirect(client: stripe.StripeClient) -> None:
    pi = _confirmed(
        client, "pm_card_threeDSecure2Required", return_url="https://vouch.example/back"
    )
    assert pi.status == "requires_action"
    assert pi.next_action.type == "redirect_to_url"
    redirect = pi.next_action.redirect_to_url
    assert redirect.return_url == "https://vouch.example/back"
    assert redirect.url.startswith("https://")
    assert pi.id in redirect.url


@pytest.mark.stripe_behaviour(
    "with error_on_requires_action=true a card that needs authentication fails the attempt: "
    "card_error authentication_required, the PaymentIntent back to requires_payment_method",
    source=ERROR_ON_REQUIRES_ACTION,
)
@pytest.mark.parametrize("pm", AUTHENTICATION_REQUIRED)
def test_error_on_requires_action_fails_the_attempt(
    client: stripe.StripeClient, sandbox: SandboxControl, pm: str
) -> None:
    with pytest.raises(stripe.CardError) as raised:
        _confirmed(client, pm, error_on_requires_action=True)
    error = raised.value
    assert (error.http_status, error.code, error.error.decline_code) == (
        402,
        "authentication_required",
        "authentication_required",
    )
    pi = error.error.payment_intent
    assert (pi.status, pi.amount_received, pi.next_action) == ("requires_payment_method", 0, None)
    assert pi.last_payment_error.code == "authentication_required"
    assert pi.last_payment_error.type == "card_error"
    charges = client.v1.charges.list(params={"payment_intent": pi.id}).data
    assert [(c.status, c.paid, c.failure_code) for c in charges] == [
        ("failed", False, "authentication_required")
    ]
    assert charges[0].balance_transaction is None
    assert "payment_intent.payment_failed" in _event_types(client)
    assert "payment_intent.requires_action" not in _event_types(client)


@pytest.mark.stripe_behaviour(
    "after the customer authenticates, the PaymentIntent succeeds with a charge authenticated "
    "by 3-D Secure",
    source=LIFECYCLE,
)
def test_authentication_completed_succeeds(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    pi = _confirmed(client, "pm_card_threeDSecure2Required")
    answered = _authenticate(sandbox, pi.id, "succeed")
    assert answered["status"] == "succeeded"
    after = client.v1.payment_intents.retrieve(pi.id)
    assert (after.status, after.amount_received, after.next_action) == ("succeeded", 2000, None)
    charge = client.v1.charges.retrieve(str(after.latest_charge))
    assert (charge.status, charge.paid, charge.amount, charge.payment_intent) == (
        "succeeded",
        True,
        2000,
        pi.id,
    )
    assert charge.payment_method_details.card.three_d_secure.result == "authenticated"
    assert charge.metadata.to_dict() == {"order": "o1"}
    assert _event_types(client)[-2:] == ["charge.succeeded", "payment_intent.succeeded"]
    assert client.v1.refunds.create(params={"charge": charge.id, "amount": 500}).amount == 500


@pytest.mark.stripe_behaviour(
    "when authentication fails the PaymentIntent returns to requires_payment_method with "
    "last_payment_error payment_intent_authentication_failure",
    source=LIFECYCLE,
)
def test_authentication_failed_returns_to_requires_payment_method(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    pi = _confirmed(client, "pm_card_threeDSecure2Required")
    _authenticate(sandbox, pi.id, "fail")
    after = client.v1.payment_intents.retrieve(pi.id)
    assert (after.status, after.amount_received, after.next_action) == (
        "requires_payment_method",
        0,
        None,
    )
    assert after.last_payment_error.code == "payment_intent_authentication_failure"
    assert sandbox.state()["counts"]["charges"] == 0
    assert _event_types(client)[-1] == "payment_intent.payment_failed"
    with pytest.raises(RuntimeError, match="400"):
        _authenticate(sandbox, pi.id, "succeed")  # nothing waits for an authentication now


@pytest.mark.stripe_behaviour(
    "a PaymentIntent is canceled from requires_action (or requires_payment_method, "
    "requires_confirmation, requires_capture, processing) with its cancellation_reason",
    source=CANCEL,
)
def test_cancel_a_payment_intent_waiting_for_authentication(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    pi = _confirmed(client, "pm_card_threeDSecure2Required")
    canceled = client.v1.payment_intents.cancel(pi.id, params={"cancellation_reason": "abandoned"})
    assert (canceled.status, canceled.cancellation_reason, canceled.next_action) == (
        "canceled",
        "abandoned",
        None,
    )
    assert isinstance(canceled.canceled_at, int)
    assert _event_types(client)[-1] == "payment_intent.canceled"
    assert client.v1.payment_intents.retrieve(pi.id).status == "canceled"
    with pytest.raises(RuntimeError, match="400"):
        _authenticate(sandbox, pi.id, "succeed")
    waiting = client.v1.payment_intents.create(params={"amount": 500, "currency": "usd"})
    assert client.v1.payment_intents.cancel(waiting.id).cancellation_reason is None


@pytest.mark.stripe_behaviour(
    "a succeeded or canceled PaymentIntent cannot be canceled: 400 payment_intent_unexpected_state",
    source=CANCEL,
)
def test_a_succeeded_payment_intent_cannot_be_canceled(client: stripe.StripeClient) -> None:
    pi = _confirmed(client, "pm_card_visa")
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.payment_intents.cancel(pi.id)
    assert (raised.value.http_status, raised.value.code) == (400, "payment_intent_unexpected_state")
    assert client.v1.payment_intents.retrieve(pi.id).status == "succeeded"
