"""Issue 38, items 5 and 6: inputs anyone (a webhook sender), a buyer on their own refund form, or
staff on the outcomes page could send, that answered 500 with a traceback; each is now the
endpoint's own 4xx refusal (or, where the input is a legitimate one, its answer). And the refund
with no amount (an empty body or `{}`), which refunds the whole unspent balance as documented,
says so in the schema and in its answer."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from envelopes.models import Envelope, RefundOperation
from envelopes.selectors.buyer import expected_shape
from stripe_sandbox.webhooks import sign
from tests.drivers.api import Api
from verification.models import ProviderEvent

pytestmark = pytest.mark.django_db

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings
BODY = json.dumps(
    {
        "id": "evt_issue38",
        "object": "event",
        "type": "refund.created",
        "created": int(time.time()),
        "data": {"object": {"id": "re_1", "object": "refund", "charge": "ch_1"}},
    }
).encode()


# --- item 5: the webhook's Stripe-Signature header ---------------------------------------------


def _good_v1() -> tuple[int, str]:
    now = int(time.time())
    header = sign(BODY, SECRET, now)
    return now, header.split("v1=", 1)[1]


def _signature_headers() -> dict[str, str]:
    now, v1 = _good_v1()
    # A header is Latin-1 on the wire (WSGI and ASGI both decode it so): bytes 0x80-0xFF arrive
    # as the characters U+0080-U+00FF.
    return {
        "v1-latin1-byte": f"t={now},v1=\xe9",
        "v1-high-byte": f"t={now},v1=\x80",
        "v1-byte-ff": f"t={now},v1=\xff",
        "v1-good-then-byte": f"t={now},v1={v1}\xe9",
        # A wrong v1 beside the byte: the good one with its last digit changed (never equal to it).
        "v1-beside-a-good-one": f"t={now},v1=\xe9,v1={v1[:-1]}{'1' if v1[-1] == '0' else '0'}",
        "v1-non-latin1": f"t={now},v1=\u20ac",
        "t-latin1-digit": f"t={now}\xb9,v1={v1}",
        "two-t-one-bad": f"t={now},t=\xe9,v1={v1}",
        "name-non-ascii": f"t={now},v\xb9=abc,v1=\xe9",
        "empty-items": ",,,=,v1=,t=",
        "only-commas": ",,,,",
    }


@pytest.mark.parametrize("name", list(_signature_headers()))
def test_a_non_ascii_or_odd_signature_header_is_invalid_signature(name: str) -> None:
    """Issue 38 item 5: `Stripe-Signature: t=<now>,v1=<a non-ASCII byte>` answered 500
    (hmac.compare_digest refuses a non-ASCII str with TypeError); it is the webhook's 400
    `invalid_signature` like any other bad signature, storing nothing."""
    response = Client(raise_request_exception=False).post(
        "/webhooks/stripe",
        BODY,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=_signature_headers()[name],
    )
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == "invalid_signature", body
    assert not ProviderEvent.objects.exists()


# --- item 5: the buyer's refund form's `expected` ----------------------------------------------

DAMAGED = {
    "overflow": "[1e400,[]]",
    "overflow-leg": '[1000000,[["fl_1",1e400]]]',
    "nan": "[NaN,[]]",
    "minus-infinity": '[1,[["fl_1",-Infinity]]]',
    "deep-open": "[" * 3_000,
    "deep-closed": "[" * 3_000 + "]" * 3_000,
    "deep-in-a-leg": '[1,[["fl_1",' + "[" * 3_000 + "]" * 3_000 + "]]]",
    "bool": "[true,[]]",
    "bool-leg": '[1,[["fl_1",false]]]',
    "float": "[1.5,[]]",
    "float-leg": '[1,[["fl_1",2.0]]]',
    "negative": "[-1,[]]",
    "negative-leg": '[1,[["fl_1",-5]]]',
    "minus-zero": "[-0.0,[]]",
    "huge": f"[{2**63},[]]",
    "huge-leg": f'[1,[["fl_1",{2**64}]]]',
    "string": '["100",[]]',
    "number-funding": "[1,[[7,1]]]",
    "legs-not-a-list": '[1,{"fl_1":1}]',
    "leg-too-long": '[1,[["fl_1",1,2]]]',
    "leg-a-string": '[1,["ab"]]',
    "object": '{"a":1}',
    "three": "[1,[],3]",
    "null": "null",
    "surrogate": '[1,[["\\ud800",1]]]',
    "not-json": "[1,",
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_a_damaged_expected_is_none(name: str) -> None:
    """Issue 38 item 5: `expected_shape` raised OverflowError on `[1e400,[]]` (int(inf)) and
    RecursionError on 3,000 `[`, and took a bool, a float or a negative for an amount. A damaged
    preview is what its docstring says: None (the form carries no preview it showed)."""
    assert expected_shape(DAMAGED[name]) is None


def test_a_preview_as_shown_is_read_back() -> None:
    assert expected_shape('[4000000,[["fl_b",3000000],["fl_a",1000000]]]') == (
        4_000_000,
        [("fl_b", 3_000_000), ("fl_a", 1_000_000)],
    )
    assert expected_shape("[0,[]]") == (0, [])


def _confirm(alice: Api, envelope_id: str, expected: str) -> Any:
    page = alice.client.get(f"/escrow/envelopes/{envelope_id}/refund/")
    key = page.content.decode().split('name="key" value="', 1)[1].split('"', 1)[0]
    return alice.client.post(
        f"/escrow/envelopes/{envelope_id}/refund/",
        {
            "csrfmiddlewaretoken": alice.csrf,
            "key": key,
            "step": "confirm",
            "choice": "everything",
            "expected": expected,
        },
    )


@pytest.mark.parametrize("expected", ["[1e400,[]]", "[" * 3_000], ids=["1e400", "3000-brackets"])
def test_a_damaged_expected_on_the_refund_form_is_not_a_500(alice: Api, expected: str) -> None:
    """Issue 38 item 5: the buyer's own refund form confirmed with `expected=[1e400,[]]` or 3,000
    `[` answered 500. The form is read as carrying no preview: the refund the form asks for
    (everything unspent) is made, once, and the person is sent to the envelope's page."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.client.raise_request_exception = False
    response = _confirm(alice, envelope_id, expected)
    assert response.status_code == 302, (response.status_code, response.content[:300])
    assert response["Location"].startswith(f"/escrow/envelopes/{envelope_id}/#refund-")
    assert RefundOperation.objects.get().requested_micro == 10_000_000
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 0


# --- item 5: the outcomes page's month bounds ---------------------------------------------------

PAGE = "/admin/disputes/outcomes/"
CSV = "/admin/disputes/outcomes/csv/"

REFUSED_MONTHS = {
    "year-zero-from": {"from": "0000-01"},
    "year-zero-to": {"to": "0000-12"},
    "arabic-indic-year-zero": {"from": "\u0660\u0660\u0660\u0660-01"},
    "arabic-indic-year": {"from": "\u0662\u0660\u0662\u0666-01"},
    "arabic-indic-all": {"to": "\u0662\u0660\u0662\u0666-\u0660\u0661"},
    "mathematical-year-zero": {"to": "\U0001d7ce\U0001d7ce\U0001d7ce\U0001d7ce-01"},
    "mathematical-year": {"from": "\U0001d7d0\U0001d7ce\U0001d7d0\U0001d7d4-01"},
    "fullwidth-year": {"from": "\uff12\uff10\uff12\uff16-01"},
}


@pytest.mark.parametrize("name", list(REFUSED_MONTHS))
def test_a_month_not_in_ascii_digits_or_out_of_range_is_the_pages_refusal(
    outcomes_viewer: Client, name: str
) -> None:
    """Issue 38 item 5: `from=0000-01` answered 500 (datetime refuses year 0), and `\\d` took any
    Unicode digit (Arabic-Indic, mathematical, fullwidth: read by int() as a year, 0000 among
    them). Only ASCII digits and years from 0001 are months: anything else is the page's 400 with
    its message, and the CSV's 400 in words."""
    query = REFUSED_MONTHS[name]
    page = outcomes_viewer.get(PAGE, query)
    assert page.status_code == 400, (page.status_code, page.content[:300])
    assert "A month is written YYYY-MM" in page.content.decode()
    csv = outcomes_viewer.get(CSV, query)
    assert csv.status_code == 400, (csv.status_code, csv.content[:300])
    assert csv["Content-Type"].startswith("text/plain")
    assert "A month is written YYYY-MM" in csv.content.decode()


@pytest.mark.parametrize(
    ("query", "counted"),
    [
        ({"to": "9999-12"}, True),
        ({"from": "0001-01", "to": "9999-12"}, True),
        ({"from": "9999-12"}, False),
        ({"from": "0001-01"}, True),
        ({"to": "0001-01"}, False),
    ],
    ids=["to-9999-12", "whole-range", "from-9999-12", "from-0001-01", "to-0001-01"],
)
def test_the_first_and_last_months_a_date_can_hold_are_answered(
    outcomes_viewer: Client, query: dict[str, str], counted: bool
) -> None:
    """Issue 38 item 5: `to=9999-12` answered 500 (the month after it, year 10000, is past what
    a date can hold). It is a month like any other: up to its end is every decision."""
    page = outcomes_viewer.get(PAGE, query)
    assert page.status_code == 200, (page.status_code, page.content[:300])
    assert ('data-reason="fraudulent" data-month="2026-10"' in page.content.decode()) is counted
    csv = outcomes_viewer.get(CSV, query)
    assert csv.status_code == 200, (csv.status_code, csv.content[:300])
    assert ("fraudulent,2026-10," in csv.content.decode()) is counted


# --- item 6: a refund with no amount says it asked for the whole unspent balance ---------------

REFUND_PATH = "/api/v1/escrow/envelopes/{envelope_id}/refund"


def test_the_refund_schema_says_no_body_refunds_the_whole_unspent_balance() -> None:
    """Issue 38 item 6: an empty body (or `{}`) refunds the whole unspent balance; the schema said
    so in the operation's prose only. The request body's own description says it, and the answer
    documents `requested` (`whole_unspent` or `amount`)."""
    schema = Client().get("/api/v1/schema/", {"format": "json"}).json()
    operation = schema["paths"][REFUND_PATH]["post"]
    components = schema["components"]["schemas"]
    request = operation["requestBody"]
    ref = request["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    described = f"{request.get('description', '')} {components[ref].get('description', '')}"
    assert "whole unspent balance" in described, described
    assert "empty body" in described, described
    assert "`{}`" in described, described
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    data = components[answer.rsplit("/", 1)[1]]["properties"]["data"]["$ref"]
    requested = components[data.rsplit("/", 1)[1]]["properties"]["requested"]
    enum_ref = requested.get("$ref") or requested["allOf"][0]["$ref"]
    assert components[enum_ref.rsplit("/", 1)[1]]["enum"] == ["amount", "whole_unspent"]
    assert "whole unspent balance" in requested["description"]


@pytest.mark.parametrize(
    ("body", "requested"),
    [(None, "whole_unspent"), ({}, "whole_unspent"), ({"amount_micro": 4_000_000}, "amount")],
    ids=["no-body", "empty-object", "an-amount"],
)
def test_a_refund_answer_says_what_was_asked_for(
    alice: Api, body: dict[str, int] | None, requested: str
) -> None:
    """Issue 38 item 6: a refund with no body refunded $64.99 and its answer did not say that no
    amount meant everything unspent. The answer says `requested`: `whole_unspent` or `amount`."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    path = REFUND_PATH.format(envelope_id=envelope_id)
    if body is None:
        response = alice.client.generic("POST", path, b"", HTTP_X_CSRFTOKEN=alice.csrf)
    else:
        response = alice.post(path, body)
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    assert data["requested"] == requested
    assert data["requested_micro"] == (10_000_000 if requested == "whole_unspent" else 4_000_000)
