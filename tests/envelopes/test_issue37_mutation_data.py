"""Issue 37's mutation bullet for envelopes/selectors/data.py
(bench/mutation/envelopes.selectors.data.toml): what the API says of a refund whose legs end
differently — one refused by Stripe, one failed later, one with no answer yet — and of a refund
preview when no dispute holds money. Every leg of these refunds is a real call to the sandbox; a
refund of a topped-up envelope takes the top-up first and the original payment second
(last in, first out)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from accounts.models import User
from envelopes import services
from envelopes.exceptions import AmountExceedsUnspent, NothingToRefund
from envelopes.models import Envelope, RefundLeg, RefundOperation
from envelopes.selectors import refund_preview
from envelopes.services.allocation import refund_allocate
from reconciliation.catch_up import catch_up_run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000


def _two_payments(alice: Api) -> str:
    envelope_id = alice.create(2 * DOLLAR)["envelope_id"]
    alice.top_up(envelope_id, 3 * DOLLAR)
    settle_runs()
    return envelope_id


def _refund(alice: Api, envelope_id: str) -> dict[str, Any]:
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code in (200, 202), response.content
    return response.json()["data"]


def _shown(alice: Api, refund_id: str) -> dict[str, Any]:
    return alice.get(f"/api/v1/escrow/refunds/{refund_id}").json()["data"]


def test_one_leg_refused_one_refunded_is_partially_refunded_and_verified(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = _two_payments(alice)
    stripe_at_sandbox.add_fault(
        "/v1/refunds", "refuse", method="POST", times=1, error_code="charge_disputed"
    )
    refund_id = _refund(alice, envelope_id)["refund_id"]
    settle_runs()

    data = _shown(alice, refund_id)
    assert [leg["outcome"] for leg in data["legs"]] == ["refused", "accepted"]
    assert data["status"] == "partially_refunded"
    assert data["verification_status"] == "verified"
    assert (data["refunded_micro"], data["pending_micro"]) == (2 * DOLLAR, 0)
    listed = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["refunds"]
    assert [r["status"] for r in listed] == ["partially_refunded"]
    operation = RefundOperation.objects.get()
    assert (data["refund_id"], data["envelope_id"]) == (refund_id, envelope_id)
    assert data["created_at"] == operation.created_at.isoformat()
    assert data["requested_micro"] == operation.requested_micro == 5 * DOLLAR
    assert data["remainder_micro"] == operation.remainder_micro
    assert set(data) == {
        *(
            f"{name}_{unit}"
            for name in ("requested", "refunded", "failed", "pending", "remainder")
            for unit in ("micro", "usd")
        ),
        "refund_id",
        "envelope_id",
        "status",
        "legs",
        "verification_status",
        "balances",
        "created_at",
    }


def test_one_leg_failed_later_beside_one_refunded_needs_attention(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = _two_payments(alice)
    refund_id = _refund(alice, envelope_id)["refund_id"]
    settle_runs()
    first = RefundLeg.objects.order_by("sequence").first()
    assert first is not None
    stripe_at_sandbox.set_refund_status(first.provider_refund_id, "failed", "lost_or_stolen_card")
    catch_up_run()  # refund.failed: that leg's money goes back to the envelope

    data = _shown(alice, refund_id)
    assert data["status"] == "partially_refunded"
    assert data["verification_status"] == "attention"  # never verified, whatever it read before
    assert [leg["verification_verdict"] for leg in data["legs"]] == ["VERIFIED", "VERIFIED"]
    assert (data["refunded_micro"], data["failed_micro"], data["pending_micro"]) == (
        2 * DOLLAR,
        3 * DOLLAR,
        0,
    )


def test_a_leg_with_no_answer_keeps_the_refund_pending_beside_a_verified_one(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = _two_payments(alice)
    stripe_at_sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    stripe_at_sandbox.add_fault("/v1/refunds", "server_error", method="POST", times=3)
    refund_id = _refund(alice, envelope_id)["refund_id"]
    stripe_at_sandbox.clear_faults()
    settle_runs()

    data = _shown(alice, refund_id)
    assert [leg["outcome"] for leg in data["legs"]] == ["unknown", "accepted"]
    assert [leg["verification_verdict"] for leg in data["legs"]] == [None, "VERIFIED"]
    assert data["status"] == "pending"
    assert data["verification_status"] == "pending"
    assert (data["refunded_micro"], data["failed_micro"], data["pending_micro"]) == (
        2 * DOLLAR,
        0,
        3 * DOLLAR,
    )


def test_a_preview_with_nothing_held_refuses_in_the_refunds_own_words(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = _two_payments(alice)
    envelope = Envelope.objects.get(public_id=envelope_id)

    with pytest.raises(AmountExceedsUnspent) as refused:
        refund_preview(envelope=envelope, amount_micro=6 * DOLLAR)
    assert "held" not in refused.value.message
    assert "held_micro" not in refused.value.details

    shown = refund_preview(envelope=envelope, amount_micro=4 * DOLLAR)
    legs = envelope.funding_legs.order_by("-sequence")
    assert shown == {
        "requested_micro": 4 * DOLLAR,
        "requested_usd": 4.0,
        "legs": [
            {
                "funding_id": legs[0].public_id,
                "kind": "top_up",
                "sequence": legs[0].sequence,
                "charge": legs[0].charge_id,
                "amount_micro": 3 * DOLLAR,
                "amount_usd": 3.0,
            },
            {
                "funding_id": legs[1].public_id,
                "kind": legs[1].kind,
                "sequence": legs[1].sequence,
                "charge": legs[1].charge_id,
                "amount_micro": 1 * DOLLAR,
                "amount_usd": 1.0,
            },
        ],
        "total_micro": 4 * DOLLAR,
        "total_usd": 4.0,
        "remainder_micro": 0,
        "remainder_usd": 0.0,
        "unspent_micro": 5 * DOLLAR,
        "unspent_usd": 5.0,
        "held_micro": 0,
        "held_usd": 0.0,
        "held_note": None,
    }


def test_one_micro_dollar_held_is_still_said(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    """Debits may leave a sub-cent balance: a dispute then holds what is left, one micro-dollar,
    and the preview still says money is held (and why it is not refunded)."""
    envelope_id = alice.create(30 * DOLLAR)["envelope_id"]
    settle_runs()
    staff = User.objects.create_user("otto", "otto@example.com", "pw-otto-123", is_staff=True)
    envelope = Envelope.objects.get(public_id=envelope_id)
    services.debit_add(
        envelope=envelope, amount_micro=30 * DOLLAR - 1, reference="job", actor=staff
    )
    charge = envelope.funding_legs.get().charge_id
    stripe_at_sandbox.open_dispute(charge, reason="fraudulent")
    catch_up_run()
    envelope.refresh_from_db()
    assert (envelope.unspent_micro, envelope.held_micro) == (0, 1)

    with pytest.raises(NothingToRefund) as refused:
        refund_preview(envelope=envelope, amount_micro=None)
    assert refused.value.details["held_micro"] == 1
    # The refusal's details are the refund's own (no second key for the same money).
    with pytest.raises(NothingToRefund) as allocated:
        refund_allocate(envelope, None)
    assert refused.value.details == allocated.value.details
    assert "held: your bank is reviewing a dispute on this payment" in refused.value.message


def test_a_refund_stripe_refused_whole_has_nothing_to_verify(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(2 * DOLLAR)["envelope_id"]
    stripe_at_sandbox.add_fault(
        "/v1/refunds", "refuse", method="POST", error_code="charge_disputed"
    )
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    stripe_at_sandbox.clear_faults()
    operation = RefundOperation.objects.get()

    data = _shown(alice, operation.public_id)
    assert [leg["outcome"] for leg in data["legs"]] == ["refused"]
    assert data["status"] == "failed"
    assert data["verification_status"] == "not_applicable"


def test_a_leg_whose_readback_contradicts_it_needs_attention_beside_a_verified_one(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = _two_payments(alice)
    refund_id = _refund(alice, envelope_id)["refund_id"]
    first = RefundLeg.objects.order_by("sequence").first()
    assert first is not None
    stripe_at_sandbox.tamper(first.provider_refund_id, amount=1)  # Stripe now shows 1 cent
    with time_machine.travel(timezone.now() + timedelta(minutes=10), tick=True):
        settle_runs()

    data = _shown(alice, refund_id)
    verdicts = [leg["verification_verdict"] for leg in data["legs"]]
    assert verdicts[1] == "VERIFIED"
    assert verdicts[0] not in ("VERIFIED", "PENDING")
    assert data["legs"][0]["released"] is False
    assert data["verification_status"] == "attention"
