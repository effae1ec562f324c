"""Issue 37's mutation round for disputes/services/disputes.py (bench/MUTATION.md): a dispute
entered by staff is read from Stripe first (SPEC §18) — what is refused before anything is read,
exactly what each refusal says, what is recorded — and the fees Stripe's balance transactions
show."""

from __future__ import annotations

from typing import Any

import pytest

from core.exceptions import InvalidInput
from core.models import AuditEvent
from disputes import exceptions as errors
from disputes import services
from disputes.models import Dispute
from disputes.services.disputes import dispute_normalize
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import staff_user
from tests.drivers.disputes37 import StripeDisputes

MAX = 999_999_990_000


def shown(**fields: Any) -> dict[str, Any]:
    """A dispute as Stripe shows it (the fields dispute_normalize needs), with these fields."""
    return {"id": "dp_1", "charge": "ch_1", "amount": 1000, "currency": "usd", **fields}


@pytest.mark.parametrize(
    ("transactions", "fees"),
    [
        (None, None),
        ([], None),
        ([{"id": "txn_1", "fee": 1500}], 15_000_000),
        ([{"id": "txn_1", "fee": 1500}, {"id": "txn_2", "fee": 0}], 15_000_000),
        ([{"id": "txn_1", "fee": 0}], 0),  # a fee of nothing is shown: not the table's
        (
            [{"id": "txn_1", "fee": 1500}, {"id": "txn_2", "fee": None}, {"id": "txn_3"}, "txn_4"],
            15_000_000,
        ),
        ([{"id": "txn_2", "fee": "1500"}], None),
    ],
)
def test_the_fees_are_the_sum_of_stripes_balance_transaction_fees(
    transactions: Any, fees: int | None
) -> None:
    normalized = dispute_normalize(shown(balance_transactions=transactions))
    assert normalized["provider_fees_micro"] == fees


def entry(dispute_id: str = "dp_x", **changes: Any) -> dict[str, Any]:
    return {
        "dispute_id": dispute_id,
        "charge_id": "ch_x",
        "amount_micro": 5_000_000,
        "reason": "product_not_received",
        **changes,
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"amount_micro": 0}, "amount_micro must be a positive whole number of cents in micro."),
        (
            {"amount_micro": -10_000},
            "amount_micro must be a positive whole number of cents in micro.",
        ),
        (
            {"amount_micro": 5_000_001},
            "amount_micro must be a positive whole number of cents in micro.",
        ),
        (
            {"amount_micro": MAX + 10_000},
            "amount_micro is at most 999,999,990,000 ($999,999.99, Stripe's most).",
        ),
    ],
)
def test_an_amount_stripe_could_not_show_is_refused_before_anything_is_read(
    db: None, stripe_at_sandbox: SandboxControl, changes: dict[str, Any], message: str
) -> None:
    """Refused by the service itself (whatever the form checked), before the provider is read:
    the dispute id names nothing at the provider, which would answer dispute_not_at_provider."""
    with pytest.raises(InvalidInput) as refused:
        services.dispute_enter(actor=staff_user("clerk"), data=entry(**changes))
    assert refused.value.message == message
    assert not Dispute.objects.exists()


@pytest.mark.parametrize("currency", ["eur", "EUR"])
def test_a_currency_other_than_usd_is_refused_before_anything_is_read(
    db: None, stripe_at_sandbox: SandboxControl, currency: str
) -> None:
    with pytest.raises(errors.UnsupportedCurrency):
        services.dispute_enter(actor=staff_user("clerk"), data=entry(currency=currency))
    assert not Dispute.objects.exists()


def test_the_largest_amount_is_read_and_compared_with_stripes(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    disputes = StripeDisputes(stripe_at_sandbox)
    dispute_id, charge = disputes.open("one")
    with pytest.raises(errors.DisputeMismatch) as refused:
        services.dispute_enter(
            actor=staff_user("clerk"),
            data=entry(dispute_id, charge_id=charge, amount_micro=MAX),
        )
    assert refused.value.details == {
        "dispute_id": dispute_id,
        "fields": {"amount_micro": {"typed": MAX, "provider": 5_000_000}},
    }


def test_a_mismatch_names_every_field_typed_against_stripes(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    disputes = StripeDisputes(stripe_at_sandbox)
    dispute_id, charge = disputes.open("one")
    with pytest.raises(errors.DisputeMismatch) as refused:
        services.dispute_enter(
            actor=staff_user("clerk"),
            data=entry(dispute_id, charge_id="ch_other", amount_micro=20_000, reason="duplicate"),
        )
    assert refused.value.message == (
        "What was typed disagrees with the dispute as the provider shows it: "
        f"charge_id typed 'ch_other', the provider shows '{charge}', "
        "amount_micro typed 20000, the provider shows 5000000, "
        "reason typed 'duplicate', the provider shows 'product_not_received'. "
        "Nothing was recorded."
    )
    assert refused.value.details == {
        "dispute_id": dispute_id,
        "fields": {
            "charge_id": {"typed": "ch_other", "provider": charge},
            "amount_micro": {"typed": 20_000, "provider": 5_000_000},
            "reason": {"typed": "duplicate", "provider": "product_not_received"},
        },
    }
    assert not Dispute.objects.exists()


def test_a_dispute_typed_in_usd_of_any_case_is_recorded_as_stripe_shows_it(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    disputes = StripeDisputes(stripe_at_sandbox)
    clerk = staff_user("clerk")
    for name, currency in (("lower", "usd"), ("upper", "USD")):
        dispute_id, charge = disputes.open(name)
        packet = services.dispute_enter(
            actor=clerk, data=entry(dispute_id, charge_id=charge, currency=currency)
        )
        dispute = Dispute.objects.get(provider_dispute_id=dispute_id)
        assert (dispute.charge_id, dispute.amount_micro, dispute.currency) == (
            charge,
            5_000_000,
            "usd",
        )
        assert packet.dispute == dispute
        prepared = AuditEvent.objects.get(action="packet.prepare", target_id=packet.public_id)
        assert prepared.details["trigger"] == "entry"
        # Stripe was told the evidence is submitted by hand, and says so.
        assert (dispute.intended_submission_method, dispute.submission_method_pending) == (
            "manual",
            False,
        )


def test_a_dispute_stripe_already_takes_by_hand_is_not_left_pending(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    disputes = StripeDisputes(stripe_at_sandbox)
    dispute_id, charge = disputes.open("manual")
    disputes.sdk.v1.disputes.update(
        dispute_id, params={"intended_submission_method": "manual", "submit": False}
    )
    services.dispute_enter(actor=staff_user("clerk"), data=entry(dispute_id, charge_id=charge))
    dispute = Dispute.objects.get(provider_dispute_id=dispute_id)
    assert (dispute.intended_submission_method, dispute.submission_method_pending) == (
        "manual",
        False,
    )


def test_a_dispute_entered_twice_names_the_one_recorded(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    disputes = StripeDisputes(stripe_at_sandbox)
    dispute_id, charge = disputes.open("one")
    clerk = staff_user("clerk")
    services.dispute_enter(actor=clerk, data=entry(dispute_id, charge_id=charge))
    with pytest.raises(errors.DisputeAlreadyRecorded) as refused:
        services.dispute_enter(actor=clerk, data=entry(dispute_id, charge_id=charge))
    assert refused.value.details == {"dispute_id": Dispute.objects.get().public_id}


def test_a_dispute_stripe_does_not_hold_is_refused_with_stripes_answer(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    with pytest.raises(errors.DisputeNotAtProvider) as refused:
        services.dispute_enter(actor=staff_user("clerk"), data=entry("dp_not_there"))
    assert refused.value.details == {
        "dispute_id": "dp_not_there",
        "provider_error": "resource_missing",
        "http_status": 404,
    }


@pytest.mark.parametrize(
    ("kind", "error"), [("server_error", "server_error"), ("timeout", "network_error")]
)
def test_an_unanswered_read_is_refused_naming_the_dispute_and_the_error(
    db: None, stripe_at_sandbox: SandboxControl, kind: str, error: str
) -> None:
    disputes = StripeDisputes(stripe_at_sandbox)
    dispute_id, charge = disputes.open("one")
    stripe_at_sandbox.add_fault(f"/v1/disputes/{dispute_id}", kind, method="GET", delay_ms=1)
    with pytest.raises(errors.DisputeReadUnavailable) as refused:
        services.dispute_enter(actor=staff_user("clerk"), data=entry(dispute_id, charge_id=charge))
    assert refused.value.details == {"dispute_id": dispute_id, "provider_error": error}
    assert not Dispute.objects.exists()
