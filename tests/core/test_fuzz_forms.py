"""Fuzzing what anyone, a buyer or staff can send outside the JSON API (issue 38, acceptance 2):
`POST /webhooks/stripe` (the Stripe-Signature header and the body, unsigned and signed with the
secret), the buyer's own forms (the refund form's fields, the refund-request confirmation, an
assistant's revocation, and the account pages' sign-in, sign-up and password-reset forms) and the
console's outcome filters (page and CSV). Fed unicode, lone surrogates (in form and query bodies
as the bytes UTF-8 cannot hold, percent-encoded), numbers at the edges (1e400, -0, 2**63, NaN,
Infinity, 5,000 digits) and deep nesting. Never a 5xx, never a traceback in the log.

Bounded and reproducible: derandomized, a fixed number of examples per surface (each test well
under a minute), no example database written (database=None). Examples that change nothing at
Stripe run in a savepoint rolled back after each; the refund form's confirmation (which may reach
the sandbox, never from inside a transaction) runs without one, on an envelope of its own."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import transaction
from django.http import HttpResponse
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stripe_sandbox.webhooks import sign
from tests.drivers.api import Api
from tests.drivers.logs import LogTap

pytestmark = pytest.mark.django_db

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings


def _fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# --- strategies ---------------------------------------------------------------------------------

ANY_CHAR = st.characters(exclude_categories=())  # every code point, lone surrogates included
EDGE_NUMBERS = [
    "1e400",
    "-1e400",
    "-0",
    "-0.0",
    "0",
    str(2**63),
    str(2**63 - 1),
    str(-(2**63)),
    str(2**64),
    "NaN",
    "Infinity",
    "-Infinity",
    "inf",
    "1" * 5_000,
    "0.001",
    "0.005",
    "1.5",
    "12.50",
    "$1,200",
    "1e2",
    "0x10",
    "\u0661\u0662",  # Arabic-Indic 12
    "\uff11\uff12",  # fullwidth 12
    "\U0001d7cf\U0001d7d0",  # mathematical 12
    "\u00b2",
]
DEEP = ["[" * 3_000, "[" * 3_000 + "]" * 3_000, "{" * 3_000, '{"a":' * 2_000 + "1" + "}" * 2_000]
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    st.sampled_from(EDGE_NUMBERS + DEEP + ["", "\x00", "\ud800", "a\udfffb", "\u202e", "é" * 300]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
MONTH = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "0000-01",
            "0001-01",
            "9999-12",
            "10000-01",
            "2026-00",
            "2026-13",
            "\u0662\u0660\u0662\u0666-\u0660\u0661",
            "\U0001d7d0\U0001d7ce\U0001d7d0\U0001d7d4-01",
            "2026-01\x00",
            " 2026-01 ",
            "2026-1",
            "-2026-01",
        ]
    ),
    st.builds(
        "{:04d}-{:02d}".format,
        st.integers(min_value=0, max_value=9_999),
        st.integers(min_value=0, max_value=13),
    ),
)
# Raw query or form bytes a hostile client can send: invalid UTF-8 and overlong forms included.
RAW_ESCAPES = st.sampled_from(["%FF", "%C0%AF", "%ED%A0%80", "%F4%90%80%80", "%", "%G0", "%00"])


def _encoded(value: str) -> str:
    """A value percent-encoded as a client might: a lone surrogate becomes the bytes UTF-8 cannot
    hold (surrogatepass)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def _form(params: dict[str, str], raw: str = "") -> str:
    return "&".join(f"{_encoded(k)}={_encoded(v)}" for k, v in params.items()) + raw


# --- what every answer must be ------------------------------------------------------------------


def _checked(tap: LogTap, response: HttpResponse) -> HttpResponse:
    assert response.status_code < 500, (response.status_code, response.content[:500])
    text = tap.text()
    assert "Traceback" not in text, text[-2000:]
    return response


def _answered(tap: LogTap, send: Callable[[], HttpResponse]) -> HttpResponse:
    """`send`'s answer, in a savepoint rolled back afterwards; never a 5xx, no traceback."""
    tap.clear()
    with transaction.atomic():
        response = send()
        transaction.set_rollback(True)
    return _checked(tap, response)


@pytest.fixture(autouse=True)
def _limits_forgotten() -> Iterator[None]:
    # allauth's and the money window's counts live in this run's cache: each test starts clean.
    cache.clear()
    yield
    cache.clear()


# --- POST /webhooks/stripe ----------------------------------------------------------------------

LATIN1 = st.characters(min_codepoint=0, max_codepoint=0xFF)
SIG_VALUES = st.one_of(
    st.text(LATIN1, max_size=80),
    st.sampled_from([*EDGE_NUMBERS, "", "\xe9", "\x80", "\xff", "a" * 64, "A" * 64]),
)
SIG_NAMES = st.sampled_from(["t", "v1", "v0", "T", "V1", "", "t ", "v1\xe9", "\xb9"])
SIG_HEADERS = st.one_of(
    st.text(LATIN1, max_size=200),
    st.text(ANY_CHAR, max_size=60),
    st.lists(st.tuples(SIG_NAMES, SIG_VALUES), max_size=8).map(
        lambda items: ",".join(f"{name}={value}" for name, value in items)
    ),
    st.tuples(st.integers(min_value=-(2**64), max_value=2**64), SIG_VALUES).map(
        lambda tv: f"t={tv[0]},v1={tv[1]}"
    ),
    # A timestamp within the tolerance, so the v1 values reach the comparison (a non-ASCII one
    # was a TypeError there: issue 38 item 5), alone or among other items.
    SIG_VALUES.map(lambda value: f"t={int(time.time())},v1={value}"),
    st.lists(st.tuples(SIG_NAMES, SIG_VALUES), max_size=4).map(
        lambda items: ",".join([f"t={int(time.time())}", *(f"{n}={v}" for n, v in items)])
    ),
)
JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(ANY_CHAR, max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(ANY_CHAR, max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)
EVENT_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(ANY_CHAR, max_size=30), JSONISH),
        "object": st.sampled_from(["event", "", "refund"]),
        "type": st.one_of(
            st.sampled_from(
                [
                    "refund.created",
                    "refund.updated",
                    "charge.refunded",
                    "charge.dispute.created",
                    "charge.dispute.closed",
                    "payment_intent.succeeded",
                    "nope",
                ]
            ),
            st.text(ANY_CHAR, max_size=20),
        ),
        "created": st.one_of(st.integers(min_value=-(2**64), max_value=2**64), JSONISH),
        "data": st.one_of(
            JSONISH,
            st.fixed_dictionaries({"object": st.dictionaries(st.text(max_size=10), JSONISH)}),
        ),
    },
)


def _event_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: a lone surrogate travels as "\\ud800"


BODIES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([d.encode() for d in DEEP] + [b"", b"null", b"1e400", b"\xff\xfe", b"[]"]),
    EVENT_FIELDS.map(_event_bytes),
    JSONISH.map(_event_bytes),
)


@_fuzz(150)
@given(header=SIG_HEADERS, body=BODIES)
def test_unsigned_webhooks_never_answer_5xx(log_tap: LogTap, header: str, body: bytes) -> None:
    """Whatever the Stripe-Signature header and body, a sender without the secret gets a 4xx in
    the webhook's error shape (issue 38 item 5: a non-ASCII v1 was a 500)."""

    def send() -> HttpResponse:
        return Client(raise_request_exception=False).post(
            "/webhooks/stripe", body, content_type="application/json", HTTP_STRIPE_SIGNATURE=header
        )

    response = _answered(log_tap, send)
    assert 400 <= response.status_code < 500, response.content[:300]
    assert response.json()["success"] is False


@_fuzz(150)
@given(body=BODIES, skew=st.sampled_from([0, 1, -1, 299, -299]))
def test_signed_webhooks_of_any_body_never_answer_5xx(
    log_tap: LogTap, body: bytes, skew: int
) -> None:
    """A body signed with the secret (the sandbox, or someone who holds it) is parsed only then:
    junk JSON, deep nesting, odd types in an event's fields are a 4xx or stored, never a 5xx."""
    header = sign(body, SECRET, int(time.time()) + skew)

    def send() -> HttpResponse:
        return Client(raise_request_exception=False).post(
            "/webhooks/stripe", body, content_type="application/json", HTTP_STRIPE_SIGNATURE=header
        )

    assert _answered(log_tap, send).status_code in (200, 302, 400, 429)


# --- the console's outcome filters --------------------------------------------------------------


@_fuzz(150)
@given(
    bounds=st.fixed_dictionaries({}, optional={"from": MONTH, "to": MONTH}),
    raw=st.one_of(st.just(""), RAW_ESCAPES.map(lambda e: f"&from={e}"), RAW_ESCAPES),
    csv=st.booleans(),
)
def test_outcome_filters_never_answer_5xx(
    log_tap: LogTap, outcomes_viewer: Client, bounds: dict[str, str], raw: str, csv: bool
) -> None:
    """The outcomes page and its CSV answer 200 or their own 400 for any month bounds (issue 38
    item 5: year 0, 9999-12 and non-ASCII digits were 500s)."""
    path = "/admin/disputes/outcomes/csv/" if csv else "/admin/disputes/outcomes/"
    query = _form(bounds, raw)
    response = _answered(log_tap, lambda: outcomes_viewer.get(f"{path}?{query}"))
    if response.status_code == 414:  # past REQUEST_MAX_URL_BYTES, before any view
        assert (
            response.content
            == f"The URL is over {django_settings.REQUEST_MAX_URL_BYTES} bytes.".encode()
        )
        return
    assert response.status_code in (200, 400), response.content[:300]


# --- the buyer's forms --------------------------------------------------------------------------

REFUND_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "key": st.one_of(TEXT, st.just("k" * 300)),
        "step": st.sampled_from(["preview", "confirm", "", "CONFIRM", "\ud800"]),
        "choice": st.sampled_from(["amount", "everything", "", "AMOUNT", "\x00"]),
        "amount": TEXT,
        "expected": st.one_of(
            st.just(""),  # none: the refund is checked against nothing shown, and may be made
            TEXT,
            JSONISH.map(json.dumps),
            st.tuples(st.sampled_from(EDGE_NUMBERS), st.sampled_from(["[]", '[["fl_x",1]]'])).map(
                lambda rl: f"[{rl[0]},{rl[1]}]"
            ),
        ),
    },
)


@pytest.fixture
def alice_envelope(alice: Api) -> tuple[Api, str]:
    return alice, str(alice.create(100_000_000)["envelope_id"])  # $100.00


def _post_form(api: Api, path: str, fields: dict[str, str], raw: str = "") -> HttpResponse:
    api.client.raise_request_exception = False
    body = _form({"csrfmiddlewaretoken": api.csrf, **fields}, raw)
    return api.client.generic("POST", path, body, content_type="application/x-www-form-urlencoded")


@_fuzz(120)
@given(fields=REFUND_FIELDS, raw=st.one_of(st.just(""), RAW_ESCAPES.map(lambda e: f"&amount={e}")))
def test_the_refund_forms_preview_never_answers_5xx(
    log_tap: LogTap, alice_envelope: tuple[Api, str], fields: dict[str, str], raw: str
) -> None:
    """The refund form's preview (anything but `step=confirm`): any field, any bytes, a 4xx or
    the form, never a 5xx."""
    api, envelope_id = alice_envelope
    fields = {
        **fields,
        "step": "preview" if fields.get("step") == "confirm" else fields.get("step", ""),
    }
    path = f"/escrow/envelopes/{envelope_id}/refund/"
    response = _answered(log_tap, lambda: _post_form(api, path, fields, raw))
    assert response.status_code in (200, 422), response.content[:300]  # the form, not a refusal
    assert b'name="key"' in response.content


@_fuzz(40)
@given(fields=REFUND_FIELDS, key=st.uuids().map(str))
def test_the_refund_forms_confirmation_never_answers_5xx(
    log_tap: LogTap, alice_envelope: tuple[Api, str], fields: dict[str, str], key: str
) -> None:
    """The refund form confirmed with any fields (issue 38 item 5: `expected=[1e400,[]]` and
    3,000 `[` were 500s). It may refund (at the sandbox), so no savepoint wraps it: the envelope's
    money runs out and later examples meet the refusal, in words."""
    api, envelope_id = alice_envelope
    log_tap.clear()
    path = f"/escrow/envelopes/{envelope_id}/refund/"
    fields = {"key": key, **fields, "step": "confirm"}  # a key most times: a refund can be made
    response = _checked(log_tap, _post_form(api, path, fields))
    # The form again (a refusal in words) or, refunded, the envelope's page: never a CSRF 403.
    assert response.status_code in (200, 302, 422), response.content[:300]


PATH_IDS = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="/?#"), max_size=30),
    st.sampled_from(["%ED%A0%80", "%FF", "%00", "x" * 300, "rr_doesnotexist", "..", "%2F"]),
)


@_fuzz(80)
@given(
    request_id=PATH_IDS,
    client_id=PATH_IDS,
    digest=TEXT,
    raw=st.one_of(st.just(""), RAW_ESCAPES.map(lambda e: f"&preview_digest={e}")),
)
def test_the_buyers_other_forms_never_answer_5xx(
    log_tap: LogTap, alice: Api, request_id: str, client_id: str, digest: str, raw: str
) -> None:
    """The refund-request confirmation and an assistant's revocation, with any id in the path and
    any digest: their not-found page or a 4xx, never a 5xx."""
    rid = request_id if "%" in request_id else quote(request_id, safe="")
    _answered(
        log_tap,
        lambda: _post_form(
            alice, f"/escrow/refund-requests/{rid}/", {"preview_digest": digest}, raw
        ),
    )
    # The client id travels in the form body (a metadata document's URL holds `/`).
    _answered(
        log_tap,
        lambda: _post_form(alice, "/escrow/assistants/revoke/", {"client_id": client_id}, raw),
    )


ACCOUNT_FORMS = {
    "/accounts/login/": ["login", "password", "remember", "next"],
    "/accounts/signup/": ["username", "email", "password1", "password2"],
    "/accounts/password/reset/": ["email"],
}


@_fuzz(90)
@given(
    form=st.sampled_from(sorted(ACCOUNT_FORMS)),
    values=st.lists(TEXT, min_size=4, max_size=4),
    raw=st.one_of(st.just(""), RAW_ESCAPES.map(lambda e: f"&email={e}")),
)
def test_the_account_forms_never_answer_5xx(
    log_tap: LogTap, form: str, values: list[str], raw: str
) -> None:
    """Sign-in, sign-up and password reset, signed out, with any text in each field."""
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.get(form)
    token = client.cookies["csrftoken"].value
    fields = dict(zip(ACCOUNT_FORMS[form], values, strict=False))

    def send() -> HttpResponse:
        body = _form({"csrfmiddlewaretoken": token, **fields}, raw)
        return client.generic("POST", form, body, content_type="application/x-www-form-urlencoded")

    assert _answered(log_tap, send).status_code in (200, 302, 400, 429)
