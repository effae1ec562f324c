import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _schema() -> dict:
    return Client().get("/api/v1/schema/", {"format": "json"}).json()


def test_every_envelope_route_is_documented_with_its_error_codes() -> None:
    schema = _schema()
    paths = schema["paths"]
    expected = {
        ("/api/v1/escrow/envelopes", "get"), ("/api/v1/escrow/envelopes", "post"),
        ("/api/v1/escrow/envelopes/{envelope_id}", "get"),
        ("/api/v1/escrow/envelopes/{envelope_id}/top-ups", "post"),
        ("/api/v1/escrow/envelopes/{envelope_id}/debits", "post"),
        ("/api/v1/escrow/envelopes/{envelope_id}/refund", "post"),
        ("/api/v1/escrow/envelopes/{envelope_id}/refunds", "get"),
        ("/api/v1/escrow/refunds/{refund_id}", "get"),
    }  # fmt: skip
    assert expected <= {(path, method) for path, ops in paths.items() for method in ops}
    refund = paths["/api/v1/escrow/envelopes/{envelope_id}/refund"]["post"]
    described = " ".join(str(r.get("description", "")) for r in refund["responses"].values())
    for code in (
        "invalid_amount", "amount_exceeds_unspent", "nothing_to_refund", "not_found",
        "session_required", "csrf_failed", "not_authenticated", "invalid_idempotency_key",
        "idempotency_key_in_use", "idempotency_key_conflict", "idempotency_key_other_surface",
    ):  # fmt: skip
        assert f"`{code}`" in described, code
    assert {"200", "202", "400", "401", "403", "404", "409", "422"} <= set(refund["responses"])
    assert "Idempotency-Key" in [p["name"] for p in refund["parameters"]]
    create = paths["/api/v1/escrow/envelopes"]["post"]
    assert "`card_declined`" in create["responses"]["402"]["description"]


def test_every_micro_field_says_micro_dollars_and_has_its_twin() -> None:
    components = _schema()["components"]["schemas"]
    checked = 0
    for name, component in components.items():
        for field, spec in component.get("properties", {}).items():
            if field.endswith("_micro"):
                checked += 1
                assert "icro-dollars" in spec.get("description", ""), (name, field)
                if name.endswith("Out"):
                    assert field[: -len("_micro")] + "_usd" in component["properties"], (
                        name,
                        field,
                    )
    assert checked >= 20
