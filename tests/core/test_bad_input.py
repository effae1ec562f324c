"""Bad input never answers 500 (SPEC §13): a NUL byte in a path id or a query value, an integer
query parameter out of range, an id too long for the idempotency record's operation column, JSON
nested too deep, a body over DATA_UPLOAD_MAX_MEMORY_SIZE. Each case is tried on every REST route
it can reach, on /api/v1/ and on the /api/ alias, and answers a coded 4xx in the error envelope
that changes nothing."""

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue, email_address_verify
from core.models import IdempotencyRecord
from tests.drivers.disputes import CLERK

pytestmark = pytest.mark.django_db

PREFIXES = ["/api/v1/", "/api/"]

# Every REST route that takes an id in its path: (method, path with {id}).
ID_ROUTES = [
    ("get", "escrow/envelopes/{id}"),
    ("post", "escrow/envelopes/{id}/top-ups"),
    ("post", "escrow/envelopes/{id}/debits"),
    ("post", "escrow/envelopes/{id}/refund"),
    ("get", "escrow/envelopes/{id}/refunds"),
    ("get", "escrow/refunds/{id}"),
    ("get", "disputes/{id}"),
    ("post", "disputes/{id}/evidence"),
    ("post", "disputes/{id}/packet"),
]
# Every REST route that reads its query string, with the parameters it reads.
LIST_ROUTES = [
    ("escrow/envelopes", ["limit", "offset"]),
    ("disputes", ["limit", "offset", "dispute_id", "charge"]),
]
# Every REST route that takes a JSON body.
BODY_ROUTES = [
    "escrow/envelopes",
    "escrow/envelopes/{id}/top-ups",
    "escrow/envelopes/{id}/debits",
    "escrow/envelopes/{id}/refund",
    "disputes",
    "disputes/{id}/evidence",
    "disputes/{id}/packet",
]
BODIES = {
    "escrow/envelopes": {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    "escrow/envelopes/{id}/top-ups": {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    "escrow/envelopes/{id}/debits": {"amount_micro": 1_000_000, "reference": "job-1"},
    "escrow/envelopes/{id}/refund": {},
    "disputes": {},
    "disputes/{id}/evidence": {},
    "disputes/{id}/packet": {},
}
MISSING_ID = "env_doesnotexist"


class Caller:
    """A staff member who may debit, logged in by session with the CSRF token, as a browser is:
    every route above is open to them, so each bad input reaches the view."""

    def __init__(self, user: User) -> None:
        self.client = APIClient(enforce_csrf_checks=True)
        self.client.force_login(user)
        self.client.get("/api/v1/me")
        self.csrf = self.client.cookies["csrftoken"].value

    def send(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        if method == "get":
            return self.client.get(path, **extra)
        return self.client.generic(
            method.upper(),
            path,
            body if isinstance(body, bytes) else _json(body if body is not None else {}),
            content_type="application/json",
            HTTP_X_CSRFTOKEN=self.csrf,
            **extra,
        )


def _json(value: Any) -> bytes:
    import json

    return json.dumps(value).encode()


@pytest.fixture
def caller(db: None) -> Caller:
    user = User.objects.create_user("opal", "opal@example.com", "opal-password-1", is_staff=True)
    # Debits, and every dispute act (the permissions the staff API asks: disputes/permissions.py),
    # so that bad input is what each route refuses, not the person.
    user.user_permissions.add(
        Permission.objects.get(codename="add_debit"),
        *Permission.objects.filter(content_type__app_label="disputes", codename__in=CLERK),
    )
    email_address_verify(user=user)  # the money routes need it before they read the body
    return Caller(User.objects.get(pk=user.pk))


@pytest.fixture
def disputed(db: None) -> str:
    """A dispute recorded from a provider event (no provider call needed to reach its routes)."""
    from disputes.models import Dispute

    return Dispute.objects.create(
        provider_dispute_id="dp_bad_input",
        charge_id="ch_bad_input",
        amount_micro=1_000_000,
        reason="fraudulent",
        source="provider",
    ).public_id


def _assert_error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code, body


def _nothing_stored() -> None:
    assert IdempotencyRecord.objects.count() == 0


# --- NUL in a path id ----------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(("method", "route"), ID_ROUTES)
@pytest.mark.parametrize("with_key", [False, True], ids=["no-key", "key"])
@pytest.mark.parametrize("bad_id", ["env_%00x", "%00", "env_%FFx", "env_%ED%A0%80"])
def test_a_nul_in_a_path_id_is_the_missing_id_404(
    caller: Caller, prefix: str, method: str, route: str, with_key: bool, bad_id: str
) -> None:
    headers = {"Idempotency-Key": "nul-key-1"} if with_key and method == "post" else {}
    body = BODIES.get(route)
    missing = caller.send(method, prefix + route.format(id=MISSING_ID), body, **headers)
    response = caller.send(method, prefix + route.format(id=bad_id), body, **headers)
    _assert_error(response, 404, "not_found")
    # Byte for byte the answer for any unknown id (SPEC §5).
    assert response.content == missing.content
    assert {k: v for k, v in response.items() if k != "Date"} == {
        k: v for k, v in missing.items() if k != "Date"
    }
    _nothing_stored()


# --- NUL or an out-of-range integer in a query value ---------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(
    ("route", "param"), [(route, param) for route, params in LIST_ROUTES for param in params]
)
def test_a_nul_in_a_query_value_is_a_400(
    caller: Caller, prefix: str, route: str, param: str
) -> None:
    _assert_error(caller.send("get", f"{prefix}{route}?{param}=a%00b"), 400, "validation_error")


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(
    "path", ["me?x=%00", "escrow/envelopes/env_x?y=%00", "disputes?charge=%ED%A0%80&x=%FF"]
)
def test_a_nul_in_an_unread_query_value_changes_nothing(
    caller: Caller, prefix: str, path: str
) -> None:
    response = caller.send("get", prefix + path)
    assert response.status_code in (200, 404)
    assert response["Content-Type"] == "application/json"


OUT_OF_RANGE = {
    "offset": ["9223372036854775808", "-1", "-9223372036854775809", "99999999999999999999999"],
    "limit": ["0", "101", "-1", "9223372036854775808"],
}
NOT_INTEGERS = ["9" * 5000, "1e3", "1_0", "%205", "%D9%A3", "", "0x10"]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(
    ("route", "param", "value"),
    [
        (route, param, value)
        for route, params in LIST_ROUTES
        for param in params[:2]
        for value in OUT_OF_RANGE[param] + NOT_INTEGERS
    ],
)
def test_an_integer_query_parameter_out_of_range_is_a_400(
    caller: Caller, prefix: str, route: str, param: str, value: str
) -> None:
    response = caller.send("get", f"{prefix}{route}?{param}={value}")
    _assert_error(response, 400, "validation_error")
    assert list(response.json()["error"]["details"]) == [param]


@pytest.mark.parametrize("route", [route for route, _ in LIST_ROUTES])
@pytest.mark.parametrize(
    "query", ["limit=1&offset=0", "limit=100&offset=1000000", "offset=9223372036854775807"]
)
def test_integer_query_parameters_in_range_still_page(
    caller: Caller, route: str, query: str
) -> None:
    response = caller.send("get", f"/api/v1/{route}?{query}")
    assert response.status_code == 200, response.content
    assert response.json()["data"]["results"] == []


# --- an id too long for the operation column, under an Idempotency-Key ---------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("route", [r for m, r in ID_ROUTES if m == "post"])
def test_a_long_id_under_an_idempotency_key_is_the_missing_id_404(
    caller: Caller, prefix: str, route: str
) -> None:
    long_id = "env_" + "x" * 400
    body = BODIES[route]
    missing = caller.send(
        "post", prefix + route.format(id=MISSING_ID), body, **{"Idempotency-Key": "long-1"}
    )
    response = caller.send(
        "post", prefix + route.format(id=long_id), body, **{"Idempotency-Key": "long-1"}
    )
    _assert_error(response, 404, "not_found")
    assert response.content == missing.content
    _nothing_stored()


def test_an_operation_name_within_the_column_is_unchanged_and_a_long_one_is_bounded() -> None:
    from core.api.idempotent import operation_name

    assert operation_name("envelope.refund", "env_A") == "envelope.refund:env_A"
    short = "e" * (255 - len("envelope.refund:"))
    assert operation_name("envelope.refund", short) == f"envelope.refund:{short}"
    long_a = operation_name("envelope.refund", short + "a")
    long_b = operation_name("envelope.refund", short + "b")
    assert len(long_a) <= 255
    assert len(long_b) <= 255
    assert long_a.startswith("envelope.refund:")
    assert long_a != long_b  # two ids, two operations
    assert long_a == operation_name("envelope.refund", short + "a")  # stable: a retry replays


# --- JSON nested too deep ------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("route", BODY_ROUTES)
@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_too_deep_is_malformed(
    caller: Caller, prefix: str, route: str, depth: int
) -> None:
    body = b"[" * depth + b"]" * depth
    response = caller.send(
        "post", prefix + route.format(id=MISSING_ID), body, **{"Idempotency-Key": "deep-1"}
    )
    _assert_error(response, 400, "malformed_request")
    response = caller.send("post", prefix + route.format(id=MISSING_ID), b'{"a": ' + body + b"}")
    _assert_error(response, 400, "malformed_request")
    _nothing_stored()


# --- a body over DATA_UPLOAD_MAX_MEMORY_SIZE -----------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("route", BODY_ROUTES)
@pytest.mark.parametrize("with_key", [False, True], ids=["no-key", "key"])
def test_a_body_over_the_upload_limit_is_a_413(
    caller: Caller, prefix: str, route: str, with_key: bool, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = _json({"reference": "x" * 2000})
    headers = {"Idempotency-Key": "big-1"} if with_key else {}
    response = caller.send("post", prefix + route.format(id=MISSING_ID), body, **headers)
    _assert_error(response, 413, "payload_too_large")
    _nothing_stored()


def test_a_bearer_token_with_a_nul_is_refused_as_any_bad_token(db: None) -> None:
    user = User.objects.create_user("tom", "tom@example.com", "tom-password-1")
    api_token_issue(user=user, name="t")
    client = APIClient()
    bad = client.get("/api/v1/me", HTTP_AUTHORIZATION="Bearer vch_nope")
    response = client.get("/api/v1/me", HTTP_AUTHORIZATION="Bearer vch_\x00nope")
    assert response.status_code == bad.status_code == 401
    assert response.json() == bad.json()


# --- NUL in a JSON string of a body --------------------------------------------------------------

NUL_BODIES = {
    "escrow/envelopes": {"amount_micro": 1_000_000, "payment_method": "pm_card\u0000visa"},
    "disputes": {
        "dispute_id": "dp_\u00001",
        "charge_id": "ch_1",
        "amount_micro": 1_000_000,
        "reason": "fraudulent",
    },
    "disputes/{id}/evidence": {
        "ref": "doc-\u00001",
        "sha256": "a" * 64,
        "kind": "delivery",
        "summary": "signed \u0000 for",
    },
    "disputes/{id}/packet": {"note\u0000": 1},
}


@pytest.mark.parametrize("route", list(NUL_BODIES))
def test_a_nul_in_a_body_string_is_a_400_that_stores_nothing(
    caller: Caller, route: str, disputed: str
) -> None:
    response = caller.send(
        "post", "/api/v1/" + route.format(id=disputed), NUL_BODIES[route],
        **{"Idempotency-Key": "nul-body-1"},
    )  # fmt: skip
    assert response.status_code == 400, response.content
    assert response.json()["success"] is False
    _nothing_stored()


# --- the admin: NUL in a query value or an object id ----------------------------------------------


def _admin_models() -> list[str]:
    from django.contrib import admin

    return sorted(
        f"{model._meta.app_label}/{model._meta.model_name}" for model in admin.site._registry
    )


@pytest.fixture
def superuser_client(db: None) -> APIClient:
    user = User.objects.create_superuser("root", "root@example.com", "root-password-1")
    client = APIClient()
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", _admin_models())
def test_a_nul_in_the_admin_is_never_a_500(superuser_client: APIClient, model: str) -> None:
    for path in (
        f"/admin/{model}/?q=a%00b",
        f"/admin/{model}/?o=%00",
        f"/admin/{model}/?p=%00",
        f"/admin/{model}/%00/change/",
        f"/admin/{model}/env_%00x/change/",
    ):
        response = superuser_client.get(path)
        assert response.status_code in (200, 302, 400, 404), (path, response.status_code)
