"""A Stripe-Signature header no one could have signed (SPEC §7, §13): a timestamp too large for a
float or a datetime, not a number, negative, empty or absent, or a header of any size. No secret
is needed to send one, so each must be the ordinary 400 `invalid_signature` in the error
envelope, storing nothing — never a 500."""

import json
import time
from typing import Any

import pytest
from django.test import Client

from stripe_sandbox.webhooks import sign
from verification.models import ProviderEvent

pytestmark = pytest.mark.django_db

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings

BODY = json.dumps(
    {
        "id": "evt_bad_sig",
        "object": "event",
        "type": "refund.created",
        "created": int(time.time()),
        "data": {"object": {"id": "re_1", "object": "refund", "charge": "ch_1"}},
    }
).encode()

HEADERS = {
    "309-digits": "t=" + "9" * 309 + ",v1=abc",  # past a float's largest, 1.8e308
    "400-digits": "t=" + "9" * 400 + ",v1=abc",
    "5000-digits": "t=" + "9" * 5000 + ",v1=abc",  # past int()'s default 4300-digit limit
    "inf": "t=inf,v1=abc",
    "nan": "t=nan,v1=abc",
    "minus-one": "t=-1,v1=abc",
    "1e400": "t=1e400,v1=abc",
    "empty-t": "t=,v1=abc",
    "no-t": "v1=abc",
    "nothing": "",
    "superscript-digit": "t=\u00b2,v1=abc",  # str.isdigit() but not int()
    "arabic-digits": "t=\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660,v1=abc",
    "zero": "t=0,v1=abc",
    "two-t": f"t={int(time.time())},t={'9' * 400},v1=abc",
    # As long as one header field may be (8,190 bytes: core.api.middleware's limit).
    "enormous": "t=" + "9" * 8_000 + ",v1=abc",
    "many-items": ",".join(["v1=abc"] * 1_100) + ",t=1" + "0" * 400,
}


def _post(signature: str) -> Any:
    return Client().post(
        "/webhooks/stripe",
        BODY,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=signature,
    )


def _assert_invalid_signature(response: Any) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == "invalid_signature", body
    assert not ProviderEvent.objects.exists()


@pytest.mark.parametrize("header", list(HEADERS.values()), ids=list(HEADERS))
def test_a_bad_signature_header_is_invalid_signature(header: str) -> None:
    _assert_invalid_signature(_post(header))


@pytest.mark.parametrize(
    "timestamp",
    [10**309, 10**400, -1, 0, 253_402_300_800],
    ids=["1e309", "1e400", "minus-one", "zero", "year-10000"],
)
def test_a_signature_made_with_the_secret_at_an_impossible_time_is_refused(
    timestamp: int,
) -> None:
    _assert_invalid_signature(_post(sign(BODY, SECRET, timestamp)))


def test_a_header_over_the_field_limit_is_refused_before_the_view() -> None:
    response = _post("t=" + "9" * 1_000_000 + ",v1=" + "a" * 1_000_000)
    assert response.status_code == 431, response.content[:300]
    assert not ProviderEvent.objects.exists()


def test_a_good_signature_still_verifies() -> None:
    response = _post(sign(BODY, SECRET, int(time.time())))
    assert response.status_code == 200, response.content
    assert ProviderEvent.objects.count() == 1
