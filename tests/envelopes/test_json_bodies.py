"""Only an absent body or `{}` means "everything" (issue 10, item 7; SPEC §3): a JSON `null`,
`[]`, `0` or `"all"` is 400 `validation_error` on every envelope endpoint, and changes nothing."""

from typing import Any

import pytest

from core.models import IdempotencyRecord
from envelopes.models import Debit, Envelope, FundingLeg, RefundOperation
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

NOT_OBJECTS = ["null", "[]", "0", '"all"', "true"]


def raw_post(api: Api, path: str, raw: str | None, key: str | None = None) -> Any:
    """The body exactly as written; None sends no body at all."""
    headers: dict[str, str] = {"HTTP_X_CSRFTOKEN": api.csrf}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return api.client.generic(
        "POST", path, data=raw or "", content_type="application/json", **headers
    )


@pytest.mark.parametrize("raw", NOT_OBJECTS)
def test_a_refund_with_a_body_that_is_not_an_object_refunds_nothing(
    alice: Api, sandbox: SandboxControl, raw: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    response = raw_post(alice, f"/api/v1/escrow/envelopes/{envelope_id}/refund", raw, key=raw)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "validation_error")
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000
    assert not RefundOperation.objects.exists()
    assert sandbox.state()["counts"]["refunds"] == 0
    assert not IdempotencyRecord.objects.exists()  # nothing happened: nothing is kept


@pytest.mark.parametrize("raw", [None, "{}", " { } "])
def test_no_body_or_an_empty_object_refunds_everything(
    alice: Api, sandbox: SandboxControl, raw: str | None
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    response = raw_post(alice, f"/api/v1/escrow/envelopes/{envelope_id}/refund", raw)
    assert response.status_code == 200, response.content
    assert response.json()["data"]["refunded_micro"] == 5_000_000


@pytest.mark.parametrize("raw", NOT_OBJECTS)
def test_every_other_envelope_endpoint_refuses_a_body_that_is_not_an_object(
    alice: Api, staff_api: Api, sandbox: SandboxControl, raw: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    for api, path in [
        (alice, "/api/v1/escrow/envelopes"),
        (alice, f"/api/v1/escrow/envelopes/{envelope_id}/top-ups"),
        (staff_api, f"/api/v1/escrow/envelopes/{envelope_id}/debits"),
    ]:
        response = raw_post(api, path, raw)
        assert (response.status_code, response.json()["error"]["code"]) == (
            400,
            "validation_error",
        ), path
    assert Envelope.objects.count() == FundingLeg.objects.count() == 1
    assert not Debit.objects.exists()
    assert sandbox.state()["counts"]["payment_intents"] == 1
