"""A lone surrogate (JSON text `"\\ud800"`, which Python's json parses to a str no UTF-8 can
encode) in a body's key, nested key or value never answers 500: the answer is a coded 4xx in the
error envelope, and a field named by unencodable text is named by its escaped form (`\\ud800`,
backslash and all), never echoed as is."""

from typing import Any

import pytest

from core.api.responses import error_body
from core.models import IdempotencyRecord
from disputes.models import Dispute
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

LONE_KEY = b'{"\\ud800": 1}'


def _send(api: Api, path: str, body: bytes, **headers: str) -> Any:
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    return api.client.generic(
        "POST",
        path,
        body,
        content_type="application/json",
        HTTP_X_CSRFTOKEN=api.csrf,
        **extra,
    )


def _assert_4xx(response: Any, code: str | None = "validation_error") -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    if code is not None:
        assert body["error"]["code"] == code, body
    response.content.decode("utf-8")  # strict: the bytes are valid UTF-8
    return body


@pytest.fixture
def envelope_id(alice: Api) -> str:
    return str(alice.create()["envelope_id"])


@pytest.fixture
def dispute_id(db: None) -> str:
    return Dispute.objects.create(
        provider_dispute_id="dp_lone_surrogate",
        charge_id="ch_lone_surrogate",
        amount_micro=1_000_000,
        reason="fraudulent",
        source="provider",
    ).public_id


@pytest.mark.parametrize("key", [None, "lone-1"], ids=["no-key", "idempotency-key"])
def test_a_lone_surrogate_key_to_the_refund_is_a_named_400(
    alice: Api, envelope_id: str, key: str | None
) -> None:
    headers = {"Idempotency-Key": key} if key else {}
    response = _send(alice, f"/api/v1/escrow/envelopes/{envelope_id}/refund", LONE_KEY, **headers)
    body = _assert_4xx(response)
    assert list(body["error"]["details"]) == ["\\ud800"]
    # Nothing was refunded.
    assert alice.get(f"/api/v1/escrow/envelopes/{envelope_id}/refunds").json()["data"] == {
        "results": []
    }


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (LONE_KEY, "\\ud800"),
        (b'{"amount_micro": "\\ud800"}', "amount_micro"),
        (b'{"amount_micro": 1000000, "\\udfff\\ud800x": 1}', "\\udfff\\ud800x"),
        (b'{"nested": {"\\ud800": 1}}', "nested"),
        (b'{"nested": ["ok", {"a": "\\udbff"}]}', "nested"),
    ],
    ids=["key", "value", "two-keys", "nested-key", "nested-value"],
)
def test_a_lone_surrogate_anywhere_in_a_refund_body_is_a_named_400(
    alice: Api, envelope_id: str, raw: bytes, named: str
) -> None:
    response = _send(alice, f"/api/v1/escrow/envelopes/{envelope_id}/refund", raw)
    assert list(_assert_4xx(response)["error"]["details"]) == [named]


EVIDENCE = b'"sha256": "' + b"a" * 64 + b'", "kind": "delivery"'


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (LONE_KEY, "\\ud800"),
        (b'{"ref": "doc-1", ' + EVIDENCE + b', "summary": "signed \\ud800 for"}', "summary"),
        (b'{"ref": "doc-\\udc00", ' + EVIDENCE + b', "summary": "signed for"}', "ref"),
        (b'{"ref": {"\\ud800": 1}}', "ref"),
    ],
    ids=["key", "value", "ref-value", "nested-key"],
)
@pytest.mark.parametrize("key", [None, "lone-2"], ids=["no-key", "idempotency-key"])
def test_a_lone_surrogate_in_evidence_is_a_named_400_that_stores_nothing(
    staff_api: Api, dispute_id: str, raw: bytes, named: str, key: str | None
) -> None:
    headers = {"Idempotency-Key": key} if key else {}
    response = _send(staff_api, f"/api/v1/disputes/{dispute_id}/evidence", raw, **headers)
    assert list(_assert_4xx(response)["error"]["details"]) == [named]
    assert not Dispute.objects.get(public_id=dispute_id).evidence.exists()
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.parametrize("raw", [b'"\\ud800"', b'["\\ud800"]'], ids=["string", "array"])
def test_a_body_that_is_not_an_object_with_a_lone_surrogate_is_a_400(
    alice: Api, envelope_id: str, raw: bytes
) -> None:
    response = _send(alice, f"/api/v1/escrow/envelopes/{envelope_id}/refund", raw)
    assert list(_assert_4xx(response)["error"]["details"]) == ["body"]


def test_the_error_envelope_escapes_unencodable_text_everywhere() -> None:
    body = error_body(
        "validation_error",
        "bad \ud800",
        {"\ud800": ["Unknown \udfff."], "ok": [{"\udc00x": "y\ud800"}], "n": 1},
    )
    assert body["error"]["message"] == "bad \\ud800"
    assert body["error"]["details"] == {
        "\\ud800": ["Unknown \\udfff."],
        "ok": [{"\\udc00x": "y\\ud800"}],
        "n": 1,
    }
    # Encodable text, the backslash included, is left exactly as it was.
    plain = {"é\\u": ["Ünknown field."]}
    assert error_body("validation_error", "fine é", plain)["error"]["details"] == plain
