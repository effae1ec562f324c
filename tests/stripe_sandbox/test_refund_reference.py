"""A card refund's acquirer reference number (ARN) as Stripe reports it: `destination_details.card`
with `reference_status` `pending` until the network has it, then `available` with the reference,
or `unavailable` (https://docs.stripe.com/api/refunds/object#refund_object-destination_details-card
-reference_status). Every object read validates against the pinned SDK's Refund class."""

import json
import re

import pytest
import stripe

from stripe_contract.objects import check_object
from stripe_sandbox.__main__ import main
from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge


def _card(refund: stripe.Refund) -> dict:
    body = json.loads(str(refund))
    assert check_object(body) == []  # the Refund class, nested DestinationDetails.Card included
    return body["destination_details"]["card"]


def test_the_reference_appears_after_the_delay_and_validates(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(3000)
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 300})
    assert _card(refund) == {
        "reference": None,
        "reference_status": "pending",
        "reference_type": "acquirer_reference_number",
        "type": "refund",
    }
    sandbox.advance_clock(2)
    assert _card(client.v1.refunds.retrieve(refund.id))["reference_status"] == "pending"
    sandbox.advance_clock(1.5)
    card = _card(client.v1.refunds.retrieve(refund.id))
    assert card["reference_status"] == "available"
    assert re.fullmatch(r"\d{23}", card["reference"])
    assert card["reference_type"] == "acquirer_reference_number"
    # The same reference on every read and in every list that shows the refund.
    listed = client.v1.refunds.list(params={"charge": charge_id}).data[0]
    assert _card(listed)["reference"] == card["reference"]
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    assert charge.refunds.data[0].destination_details.card.reference == card["reference"]


def test_no_delay_gives_the_reference_at_once(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(0)
    refund = client.v1.refunds.create(params={"charge": paid_charge(client, 1000)})
    assert _card(refund)["reference_status"] == "available"


def test_a_refund_that_fails_before_its_reference_never_gets_one(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(60_000)
    refund = client.v1.refunds.create(params={"charge": paid_charge(client, 1000)})
    sandbox.set_refund_status(refund.id, "failed", "expired_or_canceled_card")
    sandbox.advance_clock(120)
    card = _card(client.v1.refunds.retrieve(refund.id))
    assert (card["reference_status"], card["reference"]) == ("unavailable", None)


def test_a_reference_shown_stays_when_the_refund_fails_later(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(0)
    refund = client.v1.refunds.create(params={"charge": paid_charge(client, 1000)})
    shown = _card(refund)["reference"]
    sandbox.set_refund_status(refund.id, "failed", "expired_or_canceled_card")
    card = _card(client.v1.refunds.retrieve(refund.id))
    assert (card["reference_status"], card["reference"]) == ("available", shown)


@pytest.mark.parametrize("status", ["pending", "requires_action"])
def test_a_refund_not_yet_succeeded_keeps_its_reference_pending(
    client: stripe.StripeClient, sandbox: SandboxControl, status: str
) -> None:
    sandbox.reference_delay(1000)
    refund = client.v1.refunds.create(params={"charge": paid_charge(client, 1000)})
    sandbox.set_refund_status(refund.id, status)
    sandbox.advance_clock(5)
    read = client.v1.refunds.retrieve(refund.id)
    assert (read.status, _card(read)["reference_status"]) == (status, "pending")


def test_the_delay_is_a_setting_a_reset_brings_back(sandbox: SandboxControl) -> None:
    assert sandbox.state()["reference_delay_ms"] == 5000  # a few seconds by default
    sandbox.reference_delay(0)
    assert sandbox.state()["reference_delay_ms"] == 0
    sandbox.reset()
    assert sandbox.state()["reference_delay_ms"] == 5000
    with pytest.raises(RuntimeError, match="ms must be an integer >= 0"):
        sandbox.reference_delay(-1)


def test_the_command_line_refuses_a_negative_delay(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--port", "0", "--reference-delay-ms", "-5"])
    assert "--reference-delay-ms must be 0 or more" in capsys.readouterr().err
