"""The one read of a Stripe refund's reference at the card network (`destination_details.card`,
SDK `Refund.DestinationDetails.Card`)."""

from providers import RefundReference, refund_reference_of


def _refund(**card: object) -> dict:
    return {
        "id": "re_1",
        "destination_details": {"type": "card", "card": {"type": "refund", **card}},
    }


def test_an_available_reference_is_read_with_its_type() -> None:
    shown = refund_reference_of(
        _refund(
            reference="74987512345678901234567",
            reference_status="available",
            reference_type="acquirer_reference_number",
        )
    )
    assert shown == RefundReference(
        "available", "74987512345678901234567", "acquirer_reference_number"
    )
    assert shown.settled


def test_pending_and_unavailable_carry_no_reference() -> None:
    pending = refund_reference_of(_refund(reference="123", reference_status="pending"))
    assert pending == RefundReference("pending", "", "")
    assert not pending.settled
    gone = refund_reference_of(_refund(reference=None, reference_status="unavailable"))
    assert gone == RefundReference("unavailable", "", "")
    assert gone.settled


def test_available_with_nothing_in_it_is_not_yet_usable() -> None:
    assert refund_reference_of(_refund(reference=None, reference_status="available")) == (
        RefundReference("pending", "", "")
    )


def test_no_card_details_or_an_undocumented_status_is_nothing() -> None:
    assert refund_reference_of({"id": "re_1"}) is None
    assert refund_reference_of({"id": "re_1", "destination_details": None}) is None
    assert refund_reference_of({"destination_details": {"type": "card", "card": None}}) is None
    assert refund_reference_of(_refund(reference_status="shipped")) is None
    assert refund_reference_of(_refund()) is None  # Stripe's fixture: a card with no status


def test_a_reference_longer_than_its_column_is_never_cut() -> None:
    """A cut reference would be a wrong one given to a buyer's bank: one longer than Vouch keeps
    (100, the leg's column) is not read; a type longer than 40 is not named."""
    longest = refund_reference_of(_refund(reference="7" * 100, reference_status="available"))
    assert longest == RefundReference("available", "7" * 100, "")
    assert refund_reference_of(_refund(reference="7" * 101, reference_status="available")) is None
    kind = "t" * 40
    named = refund_reference_of(_refund(reference_status="pending", reference_type=kind))
    assert named == RefundReference("pending", "", kind)
    too_long = refund_reference_of(_refund(reference_status="pending", reference_type=kind + "t"))
    assert too_long == RefundReference("pending", "", "")
