"""The provider's events about payments and refunded charges (envelopes.services.provider_events):
each is read again at the provider and acted on through the one funding or release service, never
on the event's word; what cannot be read is raised (the event is processed again), never
guessed."""

import json
from typing import Any

import pytest
import stripe

from core.models import AuditEvent
from envelopes.models import Envelope, FundingLeg, FundingStatus, RefundLeg
from envelopes.selectors import ledger_breaches
from envelopes.services import (
    charge_on_refunded_event,
    funding_on_provider_event,
    refund_leg_on_provider_event,
)
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _pending_creation(alice: Api, sandbox: SandboxControl) -> FundingLeg:
    """A creation the provider charged whose answer was lost: a pending leg."""
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    return FundingLeg.objects.get()


def _succeeded(sdk: stripe.StripeClient) -> dict[str, Any]:
    return sdk.v1.events.list(params={"type": "payment_intent.succeeded"}).data[0].to_dict()


def _reads(sandbox: SandboxControl, route: str) -> int:
    return int(sandbox.state()["requests"].get(route, 0))


def test_an_event_about_another_object_reads_nothing_and_settles_nothing(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """A `charge.succeeded` carries the PaymentIntent's metadata too (the leg's id): it is not a
    PaymentIntent's event, and the handler of those neither reads nor records it."""
    leg = _pending_creation(alice, sandbox)
    charge_event = sdk.v1.events.list(params={"type": "charge.succeeded"}).data[0].to_dict()
    assert charge_event["data"]["object"]["metadata"]["vouch_funding"] == leg.public_id
    before = _reads(sandbox, "GET /v1/payment_intents/{id}")
    funding_on_provider_event(event=charge_event)
    assert _reads(sandbox, "GET /v1/payment_intents/{id}") == before
    leg.refresh_from_db()
    assert leg.status == FundingStatus.PENDING


def test_a_payment_intent_that_cannot_be_read_is_raised_naming_it(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    leg = _pending_creation(alice, sandbox)
    event = _succeeded(sdk)
    sandbox.add_fault("/v1/payment_intents/*", "server_error", method="GET")
    with pytest.raises(RuntimeError, match=event["data"]["object"]["id"]):
        funding_on_provider_event(event=event)
    sandbox.clear_faults()
    leg.refresh_from_db()
    assert leg.status == FundingStatus.PENDING  # nothing guessed: the event is processed again
    funding_on_provider_event(event=event)
    leg.refresh_from_db()
    assert leg.status == FundingStatus.SUCCEEDED


def test_an_event_without_an_id_is_no_event_of_stripes(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    leg = _pending_creation(alice, sandbox)
    event = json.loads(json.dumps(_succeeded(sdk)))
    del event["data"]["object"]["id"]
    before = _reads(sandbox, "GET /v1/payment_intents/{id}")
    funding_on_provider_event(event=event)
    charge_on_refunded_event(event=event)
    assert _reads(sandbox, "GET /v1/payment_intents/{id}") == before
    leg.refresh_from_db()
    assert leg.status == FundingStatus.PENDING


def _refunded(sdk: stripe.StripeClient) -> dict[str, Any]:
    return sdk.v1.events.list(params={"type": "charge.refunded", "limit": 1}).data[0].to_dict()


def _latest(sdk: stripe.StripeClient, event_type: str) -> dict[str, Any]:
    return sdk.v1.events.list(params={"type": event_type, "limit": 1}).data[0].to_dict()


def test_a_refund_canceled_at_the_provider_is_released_by_its_own_event(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """The stale `charge.refunded` of Vouch's own refund reads nothing (issue 40); the refund's
    own `refund.updated` is what tells, and the refund is read again before money moves."""
    data = alice.create(5_000_000)
    envelope_id = data["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "requires_action")
    sandbox.set_refund_status(leg.provider_refund_id, "canceled")
    before = (_reads(sandbox, "GET /v1/charges/{id}"), _reads(sandbox, "GET /v1/refunds"))
    charge_on_refunded_event(event=_refunded(sdk))
    assert (_reads(sandbox, "GET /v1/charges/{id}"), _reads(sandbox, "GET /v1/refunds")) == before
    leg.refresh_from_db()
    assert not leg.released

    refund_leg_on_provider_event(event=_latest(sdk, "refund.updated"))

    leg.refresh_from_db()
    assert leg.released
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000
    assert not AuditEvent.objects.filter(action="charge.refunded_elsewhere").exists()
    assert ledger_breaches() == []


def test_the_charge_or_its_refunds_unreadable_is_raised_naming_the_charge(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = alice.create(5_000_000)["funding_legs"][0]["charge"]
    sdk.v1.refunds.create(params={"charge": charge, "amount": 100})
    event = _refunded(sdk)
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    with pytest.raises(RuntimeError, match=f"the refunds of charge {charge} could not be listed"):
        charge_on_refunded_event(event=event)
    sandbox.clear_faults()
    sandbox.add_fault("/v1/charges/*", "server_error", method="GET")
    with pytest.raises(RuntimeError, match=f"charge {charge} could not be read"):
        charge_on_refunded_event(event=event)


def test_vouchs_own_refunds_and_those_in_flight_are_not_refunds_made_elsewhere(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """What the provider has refunded equals what Vouch refunded plus what it has in flight: no
    audit of a refund made elsewhere (a strict comparison, over the sum of the two)."""
    data = alice.create(5_000_000)
    envelope_id = data["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    # A second refund the provider makes but whose answer is lost: in flight, reserved.
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 500_000})
    sandbox.clear_faults()
    funding = FundingLeg.objects.get()
    assert (funding.refunded_micro, funding.reserved_micro) == (1_000_000, 500_000)
    charge_on_refunded_event(event=_refunded(sdk))
    assert not AuditEvent.objects.filter(action="charge.refunded_elsewhere").exists()


def test_a_refund_made_elsewhere_is_audited_with_what_each_side_holds(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 500_000})
    sdk.v1.refunds.create(params={"charge": charge, "amount": 100})  # as in the Dashboard
    event = _refunded(sdk)
    charge_on_refunded_event(event=event)
    audit = AuditEvent.objects.get(action="charge.refunded_elsewhere")
    assert (audit.target_type, audit.target_id) == (
        "funding_leg",
        data["funding_legs"][0]["funding_id"],
    )
    assert audit.details == {
        "charge": charge,
        "provider_amount_refunded": 150,
        "vouch_refunded_micro": 500_000,
        "vouch_reserved_micro": 0,
        "event": event["id"],
    }
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 4_500_000  # no money moved


def test_a_charge_whose_refunds_all_failed_shows_nothing_refunded_elsewhere(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    data = alice.create(5_000_000)
    envelope_id = data["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", failure_reason="declined")
    charge_on_refunded_event(event=_refunded(sdk))
    refund_leg_on_provider_event(event=_latest(sdk, "refund.failed"))
    assert not AuditEvent.objects.filter(action="charge.refunded_elsewhere").exists()
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000


def test_an_event_for_a_leg_already_settled_reads_nothing(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    alice.create(2_000_000)  # settled by its own answer
    before = _reads(sandbox, "GET /v1/payment_intents/{id}")
    funding_on_provider_event(event=_succeeded(sdk))
    assert _reads(sandbox, "GET /v1/payment_intents/{id}") == before


def test_an_id_that_is_not_a_string_is_no_id(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    leg = _pending_creation(alice, sandbox)
    event = json.loads(json.dumps(_succeeded(sdk)))
    event["data"]["object"]["id"] = 12345
    before = _reads(sandbox, "GET /v1/payment_intents/{id}")
    funding_on_provider_event(event=event)
    assert _reads(sandbox, "GET /v1/payment_intents/{id}") == before
    leg.refresh_from_db()
    assert leg.status == FundingStatus.PENDING
