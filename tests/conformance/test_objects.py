"""An object against the pinned SDK's resource class and Stripe's fixture:
stripe_contract.check_object reports a declared field missing, a field the class does not declare,
a wrong type or enum value at any depth (with its path), nested resources against their own
classes, and what Stripe includes only when expanded."""

import copy
from typing import Any

import pytest

from stripe_contract import Recorder, ResourceSeen, check_error, check_object
from stripe_contract.examples import example


def _found(obj: Any, **kwargs: Any) -> list[tuple[str, str, str | None, str | None]]:
    return [(v.param, v.kind, v.resource, v.field) for v in check_object(obj, **kwargs)]


@pytest.mark.parametrize(
    "name",
    ["charge", "refund", "dispute", "payment_intent", "balance_transaction", "file", "event"],
)
def test_a_conforming_object_has_no_violation(name: str) -> None:
    assert check_object(example(name), expanded=[]) == []


def test_a_declared_required_field_missing_is_reported() -> None:
    refund = example("refund")
    del refund["amount"]  # Refund.amount: int, not Optional
    assert _found(refund) == [("amount", "missing", "refund", "amount")]


def test_a_fixture_field_missing_is_reported() -> None:
    """Refund.receipt_number is Optional, but Stripe's fixture always shows it."""
    refund = example("refund")
    del refund["receipt_number"]
    assert _found(refund) == [("receipt_number", "fixture_missing", "refund", "receipt_number")]


def test_a_field_the_class_does_not_declare_is_reported_at_any_depth() -> None:
    dispute = example("dispute")
    dispute["evidence"]["appeal"] = {"card": None, "reason_for_filing": "flat, not under card"}
    dispute["evidence"]["enhanced_evidence"]["mastercard_compliance"] = {}
    dispute["appeal_eligible"] = True  # Stripe has it in evidence_details, not at the top
    found = sorted(_found(dispute))
    assert [(path, kind) for path, kind, _, _ in found] == [
        ("appeal_eligible", "undeclared"),
        ("evidence.appeal.reason_for_filing", "undeclared"),
        ("evidence.enhanced_evidence.mastercard_compliance.fee_acknowledged", "missing"),
    ]
    assert {resource for _, _, resource, _ in found} == {"dispute"}


def test_wrong_types_and_enum_values_are_reported() -> None:
    charge = example("charge")
    charge.update(amount=True, paid="yes", status="settled", created=1.5)
    assert sorted(_found(charge)) == [
        ("amount", "type", "charge", "amount"),  # an int is never a bool
        ("created", "type", "charge", "created"),
        ("paid", "type", "charge", "paid"),
        ("status", "enum", "charge", "status"),
    ]
    fee = example("balance_transaction")
    fee["exchange_rate"] = 1  # Optional[float]: an int is a number too
    assert _found(fee) == []


def test_an_expandable_field_is_an_id_or_the_object() -> None:
    intent = example("payment_intent")
    intent["latest_charge"] = "ch_123"
    assert _found(intent) == []
    charge = example("charge")
    intent["latest_charge"] = charge
    assert _found(intent) == []
    del charge["paid"]
    assert _found(intent) == [("latest_charge.paid", "missing", "charge", "paid")]


def test_an_events_object_is_checked_against_its_own_class() -> None:
    event = example("event")
    refund = example("refund")
    refund["bogus"] = 1
    event["data"] = {"object": refund, "previous_attributes": {"status": "pending"}}
    assert _found(event) == [("data.object.bogus", "undeclared", "refund", "bogus")]


def test_charge_refunds_are_included_only_when_expanded() -> None:
    """https://docs.stripe.com/changelog/2022-11-15/deprecates-charges-auto-expand"""
    charge = example("charge")
    assert "refunds" not in charge
    assert _found(charge, expanded=[]) == []  # absent: not a gap in the fixture's fields
    charge["refunds"] = {"object": "list", "data": [example("refund")], "has_more": False,
                         "url": "/v1/charges/ch_1/refunds"}  # fmt: skip
    assert _found(charge, expanded=[]) == [("refunds", "not_expanded", "charge", "refunds")]
    assert _found(charge, expanded=["refunds"]) == []
    assert _found(charge) == []  # expand unknown: not judged
    page = {"object": "list", "data": [charge], "has_more": False, "url": "/v1/charges"}
    assert _found(page, expanded=["data.refunds"]) == []
    assert _found(page, expanded=[]) == [("data[0].refunds", "not_expanded", "charge", "refunds")]
    event = example("event")
    event["data"] = {"object": charge}
    assert _found(event, expanded=()) == [
        ("data.object.refunds", "not_expanded", "charge", "refunds")
    ]


def test_pages_are_checked_with_their_items() -> None:
    refund = example("refund")
    page = {"object": "list", "data": [refund, copy.deepcopy(refund)], "has_more": False}
    page["data"][1]["status"] = 7
    assert sorted(_found(page)) == [
        ("data[1].status", "type", "refund", "status"),
        ("url", "missing", None, "url"),
    ]
    search = {"object": "search_result", "data": [example("payment_intent")], "has_more": False,
              "url": "/v1/payment_intents/search", "next_page": None}  # fmt: skip
    assert _found(search) == []


def test_an_unknown_object_and_a_tampered_one() -> None:
    assert _found({"object": "sandwich", "id": "x"}) == [("object", "enum", None, "object")]
    refund = example("refund")
    refund["amount"] = "lots"
    assert _found(refund, skip_ids={refund["id"]}) == []


def test_error_answers_are_checked_against_error_object() -> None:
    error = {"type": "invalid_request_error", "code": "parameter_unknown", "param": "x",
             "message": "Received unknown parameter: x", "doc_url": "https://docs.stripe.com/x",
             "request_log_url": "https://dashboard.stripe.com/test/logs/req_1"}  # fmt: skip
    assert check_error({"error": error}) == []
    error["hint"] = "try again"
    assert [(v.param, v.kind) for v in check_error({"error": error})] == [
        ("error.hint", "undeclared")
    ]


def test_what_each_resource_showed_is_gathered() -> None:
    seen: dict[str, ResourceSeen] = {}
    refund = example("refund")
    refund["status"] = "pending"
    charge = example("charge")
    charge["refunds"] = {"object": "list", "data": [refund], "has_more": False, "url": "/v1/x"}
    check_object(charge, seen=seen)
    assert seen["refund"].statuses == {"pending"}
    assert seen["refund"].count == 1
    assert "refunds" in seen["charge"].fields
    assert "level3" not in seen["charge"].fields
    recorder = Recorder()
    recorder.record_object(charge, expanded=["refunds"])
    report = recorder.report()["objects"]["resources"]
    assert report["refund"]["statuses"] == ["pending"]
    assert "amount" in report["charge"]["declared"]
    assert "refunds" in report["charge"]["returned"]
