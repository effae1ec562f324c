"""The buyer sees the truth on the confirmation page (issue 26, SPEC §16): the preview says when a
leg's charge is disputed and what will happen; after confirming, a refused leg shows its reason
and that its money is back in the envelope, and no success banner stands beside a refund that
moved nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest

from disputes import services as disputes
from envelopes.models import Envelope
from stripe_sandbox.client import SandboxControl
from tests.agents.test_confirm import Browser, propose, text
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_request_limit(settings: Any) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""


def _dispute(sandbox: SandboxControl, charge: str) -> None:
    """A $1.00 chargeback on the charge: Stripe withdraws $1.00 (held in the envelope, SPEC §18)
    and refuses any refund of the rest of that charge (`charge_disputed`)."""
    opened = sandbox.open_dispute(charge, reason="fraudulent", amount=100)
    disputes.dispute_on_provider_event(
        event={"type": "charge.dispute.created", "data": {"object": {"id": opened["id"]}}}
    )


def _banner(body: str) -> tuple[str, str]:
    """The message shown after pressing Confirm: (its level, its text)."""
    found = re.search(r'<li class="(success|info|warning|error)">(.*?)</li>', body)
    assert found is not None, "no message shown"
    return found.group(1), found.group(2)


def test_a_disputed_charge_is_named_in_the_preview_and_its_refusal_moves_nothing(
    alice: Api, sandbox: SandboxControl
) -> None:
    created = alice.create(4_000_000)
    charge = created["funding_legs"][0]["charge"]
    _dispute(sandbox, charge)
    request_id = propose(alice, created["envelope_id"])
    owner = Browser(alice.user)

    preview = text(owner.open(request_id))
    assert 'id="preview-disputed"' in preview
    assert "disputed" in preview
    assert "stays in your envelope" in preview
    assert f'data-disputed-charge="{charge}"' in preview
    # The $1.00 the chargeback took is held, and the page says so (SPEC §18).
    assert "$1.00 held: your bank is reviewing a dispute on this payment" in preview

    page = owner.confirm(request_id)

    body = text(page)
    level, message = _banner(body)
    assert level == "error", message
    assert "Nothing was refunded" in message
    assert "back in your envelope" in message
    assert "Confirmed" not in message
    assert "code: charge_disputed" in body  # the code only in the leg's details
    assert 'data-leg-state="refused"' in body  # in the envelope page's words (issue 41)
    assert "Refused by Stripe: the payment is disputed" in body
    envelope = Envelope.objects.get(public_id=created["envelope_id"])
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (0, 3_000_000)
    assert envelope.held_micro == 1_000_000  # the chargeback's, never offered for refund


def test_an_inquiry_is_refunded_as_stripe_allows_and_the_preview_warns_of_nothing(
    alice: Api, sandbox: SandboxControl
) -> None:
    """Issue 36, item 3: Stripe refunds a charge under an inquiry (`warning_needs_response`,
    `case_type: inquiry`, `is_charge_refundable: true`). The page once told the buyer that a part
    on any disputed charge "will be refused, stays in your envelope", a rule Stripe doesn't
    have: what Stripe says of the dispute decides, and the refund is made."""
    created = alice.create(4_000_000)
    charge = created["funding_legs"][0]["charge"]
    opened = sandbox.open_dispute(charge, reason="fraudulent", case_type="inquiry")
    assert opened["is_charge_refundable"] is True
    disputes.dispute_on_provider_event(
        event={"type": "charge.dispute.created", "data": {"object": {"id": opened["id"]}}}
    )
    request_id = propose(alice, created["envelope_id"])
    owner = Browser(alice.user)
    preview = text(owner.open(request_id))
    assert 'id="preview-disputed"' not in preview
    assert "will be refused" not in preview

    level, message = _banner(text(owner.confirm(request_id)))
    assert level == "success", message
    envelope = Envelope.objects.get(public_id=created["envelope_id"])
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (4_000_000, 0)
    assert sandbox.state()["charges"][charge]["amount_refunded"] == 400


def test_a_partly_refused_refund_says_which_part_is_back_in_the_envelope(
    alice: Api, sandbox: SandboxControl
) -> None:
    created = alice.create(10_000_000)
    alice.top_up(created["envelope_id"], 3_000_000)
    envelope = Envelope.objects.get(public_id=created["envelope_id"])
    disputed = envelope.funding_legs.order_by("sequence").values_list("charge_id", flat=True)[1]
    _dispute(sandbox, disputed)
    request_id = propose(alice, created["envelope_id"])
    owner = Browser(alice.user)
    preview = text(owner.open(request_id))
    assert re.findall(r'data-disputed-charge="([^"]+)"', preview) == [disputed]  # that one only
    # $1.00 of the top-up is held by the chargeback; its other $2.00 is on a disputed charge.
    assert "$2.00 of this refund is on a disputed charge" in preview
    # Newest funding first: the top-up, then the original charge.
    assert re.findall(r"<tr[^>]*><td[^>]*>(original payment|top-up #\d+)", preview) == [
        "top-up #1",  # top-ups are numbered from 1 (issue 41), one word: "payment"
        "original payment",
    ]

    level, message = _banner(text(owner.confirm(request_id)))

    assert level == "warning", message
    assert "$2.00" in message
    assert "back in your envelope" in message
    envelope = Envelope.objects.get(public_id=created["envelope_id"])
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (10_000_000, 2_000_000)
    assert envelope.held_micro == 1_000_000


def test_a_refund_stripe_accepted_whole_is_a_success(alice: Api, sandbox: SandboxControl) -> None:
    created = alice.create(2_000_000)
    request_id = propose(alice, created["envelope_id"])
    owner = Browser(alice.user)
    assert 'id="preview-disputed"' not in text(owner.open(request_id))
    assert "data-disputed-charge" not in text(owner.open(request_id))

    level, message = _banner(text(owner.confirm(request_id)))

    assert (level, message) == (
        "success",
        "Confirmed: the refund went to Stripe; its status is below.",
    )


def test_a_refund_whose_answer_is_unknown_is_confirmed_without_a_success(
    alice: Api, sandbox: SandboxControl
) -> None:
    created = alice.create(2_000_000)
    request_id = propose(alice, created["envelope_id"])
    # Every try of the refund times out: its outcome is unknown (a state, not a guess).
    sandbox.add_fault("/v1/refunds", "delay", method="POST", times=20, delay_ms=1500)

    level, message = _banner(text(Browser(alice.user).confirm(request_id)))

    assert (level, message) == (
        "info",
        "Confirmed: the refund went to Stripe; its answer is not in yet.",
    )
