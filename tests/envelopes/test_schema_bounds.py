"""The OpenAPI schema states the bounds the services enforce on amounts (the constants of
envelopes.services and envelopes.models, never other numbers): a funding charge's, and a refund's
or debit's, which can never exceed the unspent balance, itself never more than an envelope's
largest funding. And it documents the 403 `email_unverified` of the routes that move money."""

from typing import Any

import pytest
from django.test import Client

from envelopes.models import MICRO_PER_CENT
from envelopes.services import MAX_ENVELOPE_MICRO, MIN_FUNDING_MICRO
from tests.drivers.api import Api

MONEY_OPERATIONS = {
    "envelopes_create": ("post", "/api/v1/escrow/envelopes"),
    "envelopes_top_up": ("post", "/api/v1/escrow/envelopes/{envelope_id}/top-ups"),
    "envelopes_refund": ("post", "/api/v1/escrow/envelopes/{envelope_id}/refund"),
}


@pytest.fixture
def schema(db: None) -> dict[str, Any]:
    response = Client().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def _request_body(schema: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    ref = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    return schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


def test_funding_amounts_state_the_services_bounds(schema: dict[str, Any]) -> None:
    for operation in ("envelopes_create", "envelopes_top_up"):
        amount = _request_body(schema, *MONEY_OPERATIONS[operation])["properties"]["amount_micro"]
        assert amount["type"] == "integer"
        assert amount["minimum"] == MIN_FUNDING_MICRO
        assert amount["maximum"] == MAX_ENVELOPE_MICRO
        assert amount["multipleOf"] == MICRO_PER_CENT
        assert amount["maximum"] < 2**63 - 1  # not the whole int64 range


def test_refund_and_debit_amounts_state_their_bounds(schema: dict[str, Any]) -> None:
    paths = {
        "refund": "/api/v1/escrow/envelopes/{envelope_id}/refund",
        "debit": "/api/v1/escrow/envelopes/{envelope_id}/debits",
    }
    # A debit is any positive number of micro-dollars; a refund at least a cent (issue 27).
    minimum = {"refund": 10_000, "debit": 1}
    for name, path in paths.items():
        amount = _request_body(schema, "post", path)["properties"]["amount_micro"]
        assert (amount["minimum"], amount["maximum"]) == (minimum[name], MAX_ENVELOPE_MICRO), name
        assert "multipleOf" not in amount, name  # any micro-dollar; legs round down to a cent
        assert "amount_exceeds_unspent" in amount["description"], name


def test_a_refund_above_the_largest_funding_is_amount_exceeds_unspent(
    alice: Api, staff_api: Api
) -> None:
    envelope_id = alice.create(MAX_ENVELOPE_MICRO)["envelope_id"]
    refund = f"/api/v1/escrow/envelopes/{envelope_id}/refund"
    over = alice.post(refund, {"amount_micro": MAX_ENVELOPE_MICRO + 1})
    assert over.status_code == 422, over.content
    assert over.json()["error"]["code"] == "amount_exceeds_unspent"
    debit = f"/api/v1/escrow/envelopes/{envelope_id}/debits"
    over = staff_api.post(debit, {"amount_micro": MAX_ENVELOPE_MICRO + 1, "reference": "job-1"})
    assert over.status_code == 422, over.content
    whole = alice.post(refund, {"amount_micro": MAX_ENVELOPE_MICRO})
    assert whole.status_code == 200, whole.content
    assert whole.json()["data"]["refunded_micro"] == MAX_ENVELOPE_MICRO


@pytest.mark.parametrize(
    ("amount", "status"),
    [
        (MIN_FUNDING_MICRO, 201),
        (MIN_FUNDING_MICRO - MICRO_PER_CENT, 400),
        (MIN_FUNDING_MICRO + MICRO_PER_CENT // 2, 400),
        (MAX_ENVELOPE_MICRO, 201),
        (MAX_ENVELOPE_MICRO + MICRO_PER_CENT, 400),
    ],
)
def test_the_server_enforces_what_the_schema_states(alice: Api, amount: int, status: int) -> None:
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": amount, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == status, response.content
    if status == 400:
        assert response.json()["error"]["code"] == "invalid_amount"


def test_money_routes_document_email_unverified(schema: dict[str, Any]) -> None:
    for operation, (method, path) in MONEY_OPERATIONS.items():
        refused = schema["paths"][path][method]["responses"]["403"]
        examples = refused["content"]["application/json"]["examples"]
        assert "email_unverified" in {e["value"]["error"]["code"] for e in examples.values()}, (
            operation
        )
    reads = schema["paths"]["/api/v1/escrow/envelopes"]["get"]["responses"]
    assert "email_unverified" not in str(reads.get("403", ""))
