"""The OpenAPI schema says what the API does (issue 12, finding 6): every status each operation can
answer, the Idempotency-Key header's rules, the bounds of every `amount_micro`, the bodies that
refuse unknown fields and the query parameters' ranges; and, for each documented rule, the API
refuses what the schema refuses. `.ci/schemathesis.py` checks the same against a live server."""

import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import email_address_verify
from core.idempotency import InvalidIdempotencyKey, validate_key
from disputes import evidence
from envelopes.models import MICRO_PER_CENT
from envelopes.services import MAX_ENVELOPE_MICRO, MIN_FUNDING_MICRO
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import CLERK
from tests.drivers.disputes37 import StripeDisputes

pytestmark = pytest.mark.django_db

INT64_MAX = 2**63 - 1
COMMON = {"400", "401", "406", "413", "414", "429", "431"}  # every operation
WITH_BODY = {"415"}  # every POST

STATUSES = {
    "me_retrieve": {"200"},
    "envelopes_list": {"200"},
    "envelopes_create": {"201", "202", "402", "403", "409", "422", "502"} | WITH_BODY,
    "envelopes_retrieve": {"200", "404"},
    "envelopes_top_up": {"201", "202", "402", "403", "404", "409", "422", "502"} | WITH_BODY,
    "envelopes_debit": {"201", "403", "404", "409", "422"} | WITH_BODY,
    "envelopes_refund": {"200", "202", "403", "404", "409", "422"} | WITH_BODY,
    "envelopes_refunds": {"200", "404"},
    "refunds_retrieve": {"200", "404"},
    "disputes_list": {"200", "403"},
    "disputes_enter": {"201", "403", "404", "409", "422", "503"} | WITH_BODY,
    "disputes_retrieve": {"200", "403", "404"},
    "disputes_evidence_admit": {"200", "201", "403", "404", "409", "422"} | WITH_BODY,
    "disputes_packet_prepare": {"201", "403", "404", "409", "422"} | WITH_BODY,
}


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = Client().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


def _operations(schema: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {
        op["operationId"]: (method, path, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
    }


def _component(schema: dict[str, Any], ref: str) -> dict[str, Any]:
    found: dict[str, Any] = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return found


def _body(schema: dict[str, Any], operation_id: str) -> dict[str, Any]:
    _, _, op = _operations(schema)[operation_id]
    return _component(schema, op["requestBody"]["content"]["application/json"]["schema"]["$ref"])


def _codes(response: dict[str, Any]) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", response["description"]))


# --- statuses ------------------------------------------------------------------------------------


def test_every_operation_documents_each_status_it_can_answer(schema: dict[str, Any]) -> None:
    operations = _operations(schema)
    assert set(operations) == set(STATUSES)
    for operation_id, (_, _, op) in operations.items():
        assert set(op["responses"]) == STATUSES[operation_id] | COMMON, operation_id


def test_the_errors_of_any_request_are_documented_with_their_codes(
    schema: dict[str, Any],
) -> None:
    for operation_id, (method, _, op) in _operations(schema).items():
        responses = op["responses"]
        assert "malformed_request" in _codes(responses["400"]), operation_id
        assert _codes(responses["401"]) >= {"not_authenticated", "authentication_failed"}
        assert _codes(responses["406"]) == {"not_acceptable"}
        assert _codes(responses["413"]) == {"payload_too_large"}
        assert _codes(responses["414"]) == {"uri_too_long"}
        assert _codes(responses["431"]) == {"headers_too_large"}
        assert _codes(responses["429"]) == {"rate_limited"}
        assert responses["429"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
        if method == "post":
            assert _codes(responses["415"]) == {"unsupported_media_type"}
            assert "csrf_failed" in _codes(responses["403"]), operation_id
        for status, response in responses.items():
            if status >= "400":
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorEnvelope"), (operation_id, status)


def test_the_envelope_list_documents_its_400_for_bad_paging(schema: dict[str, Any]) -> None:
    _, _, op = _operations(schema)["envelopes_list"]
    assert _codes(op["responses"]["400"]) == {"validation_error", "malformed_request"}
    response = _buyer().get("/api/v1/escrow/envelopes?offset=null")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


# --- Idempotency-Key -----------------------------------------------------------------------------


def test_every_post_documents_the_idempotency_key_rules(schema: dict[str, Any]) -> None:
    for operation_id, (method, _, op) in _operations(schema).items():
        headers = [p for p in op.get("parameters", []) if p["name"] == "Idempotency-Key"]
        if method != "post":
            assert not headers, operation_id
            continue
        (header,) = headers
        assert header["in"] == "header"
        assert not header.get("required")
        assert header["schema"]["minLength"] == 1
        assert header["schema"]["maxLength"] == 255
        assert "invalid_idempotency_key" in _codes(op["responses"]["400"])
        assert _codes(op["responses"]["409"]) >= {"idempotency_key_in_use"}
        assert _codes(op["responses"]["422"]) >= {
            "idempotency_key_conflict",
            "idempotency_key_other_surface",
        }
        for status, response in op["responses"].items():
            if status.startswith("2"):
                assert "Idempotent-Replayed" in response["headers"], (operation_id, status)


@pytest.mark.parametrize(
    ("key", "documented"),
    [
        ("k", True),
        ("a" * 255, True),
        ("refund 2024-01-01 #1", True),
        ("~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}", True),
        ("", False),
        ("a" * 256, False),
        ("caf\u00e9", False),
        ("tab\there", False),
        ("nul\x00", False),
        (" leading", False),  # a header loses it on the way: documented keys avoid it
        ("trailing ", False),
    ],
)
def test_the_documented_key_pattern_is_what_the_server_accepts(
    schema: dict[str, Any], key: str, documented: bool
) -> None:
    _, _, op = _operations(schema)["envelopes_refund"]
    (header,) = [p for p in op["parameters"] if p["name"] == "Idempotency-Key"]
    rules = header["schema"]
    matches = (
        rules["minLength"] <= len(key) <= rules["maxLength"]
        and re.fullmatch(rules["pattern"], key) is not None
    )
    assert matches is documented
    if documented:
        assert validate_key(key) == key
    elif key.strip(" ") == key:
        with pytest.raises(InvalidIdempotencyKey):
            validate_key(key)


def test_a_key_longer_than_documented_is_refused_before_anything_else() -> None:
    client = _buyer()
    path = "/api/v1/escrow/envelopes/env_missing/refund"
    refused = client.post(path, {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k" * 256)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_idempotency_key"
    longest = client.post(path, {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k" * 255)
    assert longest.status_code == 404


# --- amounts -------------------------------------------------------------------------------------


def test_amount_micro_states_the_bounds_the_services_enforce(schema: dict[str, Any]) -> None:
    funding = _body(schema, "envelopes_create")["properties"]["amount_micro"]
    assert _body(schema, "envelopes_top_up")["properties"]["amount_micro"] == funding
    assert funding["minimum"] == MIN_FUNDING_MICRO == 1_000_000
    assert funding["maximum"] == MAX_ENVELOPE_MICRO == 5_000_000_000
    assert funding["multipleOf"] == MICRO_PER_CENT == 10_000
    # A debit is any positive amount, a refund at least a cent (issue 27).
    for operation_id, minimum in (("envelopes_debit", 1), ("envelopes_refund", MICRO_PER_CENT)):
        amount = _body(schema, operation_id)["properties"]["amount_micro"]
        # No envelope's unspent balance exceeds its largest funding: nothing above can succeed.
        assert (amount["minimum"], amount["maximum"]) == (minimum, MAX_ENVELOPE_MICRO), operation_id
        assert "multipleOf" not in amount
    disputed = _body(schema, "disputes_enter")["properties"]["amount_micro"]
    assert disputed["minimum"] == disputed["multipleOf"] == MICRO_PER_CENT
    assert disputed["maximum"] % MICRO_PER_CENT == 0
    assert disputed["maximum"] == 99_999_999 * MICRO_PER_CENT  # Stripe's largest amount


@pytest.mark.parametrize(
    "amount",
    [
        MIN_FUNDING_MICRO - MICRO_PER_CENT,
        MIN_FUNDING_MICRO + 1,
        MAX_ENVELOPE_MICRO + MICRO_PER_CENT,
    ],
)
def test_a_funding_amount_outside_the_documented_bounds_is_invalid_amount(amount: int) -> None:
    response = _buyer().post(
        "/api/v1/escrow/envelopes",
        {"amount_micro": amount, "payment_method": "pm_card_visa"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_amount"


# --- bodies and query parameters ------------------------------------------------------------------


def test_request_bodies_say_they_refuse_unknown_fields(schema: dict[str, Any]) -> None:
    for operation_id, (_, _, op) in _operations(schema).items():
        if "requestBody" in op:
            assert _body(schema, operation_id)["additionalProperties"] is False, operation_id
    response = _buyer().post(
        "/api/v1/escrow/envelopes/env_missing/refund",
        {"amount_micro": 10_000, "note": "x"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"note": ["Unknown field."]}


def test_text_fields_say_they_refuse_nul_and_blank(schema: dict[str, Any]) -> None:
    reference = _body(schema, "envelopes_debit")["properties"]["reference"]
    pattern = re.compile(reference["pattern"])
    assert pattern.fullmatch("claim-42")
    assert pattern.fullmatch(" x ")
    assert not pattern.fullmatch("a\x00b")
    assert not pattern.fullmatch("  \t")
    evidence_body = _body(schema, "disputes_evidence_admit")["properties"]
    assert evidence_body["ref"]["pattern"] == evidence._REF.pattern
    assert evidence_body["sha256"]["pattern"] == evidence._SHA256.pattern


def test_text_query_parameters_say_they_refuse_nul(schema: dict[str, Any]) -> None:
    """The dispute list's filters refuse a NUL character (`query_text`: 400); the schema says so,
    or a client (schemathesis found it) sends one as valid."""
    _, _, op = _operations(schema)["disputes_list"]
    params = {p["name"]: p["schema"] for p in op["parameters"]}
    for name in ("dispute_id", "charge"):
        pattern = re.compile(params[name]["pattern"])
        assert pattern.search("dp_1\u00e9")
        assert not pattern.search("dp\x001"), name


def test_page_parameters_state_their_ranges(schema: dict[str, Any]) -> None:
    for operation_id in ("envelopes_list", "disputes_list"):
        _, _, op = _operations(schema)[operation_id]
        params = {p["name"]: p["schema"] for p in op["parameters"]}
        assert (params["limit"]["minimum"], params["limit"]["maximum"]) == (1, 100)
        assert (params["offset"]["minimum"], params["offset"]["maximum"]) == (0, INT64_MAX)
    client = _buyer()
    assert client.get("/api/v1/escrow/envelopes?limit=100&offset=0").status_code == 200
    assert client.get(f"/api/v1/escrow/envelopes?offset={INT64_MAX}").status_code == 200
    for query in ("limit=0", "limit=101", "offset=-1", f"offset={INT64_MAX + 1}"):
        assert client.get(f"/api/v1/escrow/envelopes?{query}").status_code == 400, query


def test_a_packet_cites_evidence_as_the_schema_says(
    schema: dict[str, Any], sandbox: SandboxControl, settings: Any
) -> None:
    """A packet's evidence refs are {ref, sha256, kind, summary}: no admission fields; `file`
    (name, size, type) only for evidence admitted with a file, in the admin."""
    settings.STRIPE_API_BASE = sandbox.url
    staff = User.objects.create_user(username="ops", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="disputes", codename__in=CLERK)
    )
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=staff.pk))
    # A dispute Stripe holds (staff entry reads it first: SPEC §18).
    dispute, charge = StripeDisputes(sandbox).open("x", amount_cents=50, reason="fraudulent")
    entered = client.post(
        "/api/v1/disputes",
        {
            "dispute_id": dispute,
            "charge_id": charge,
            "amount_micro": 500_000,
            "reason": "fraudulent",
        },
        format="json",
    )
    assert entered.status_code == 201, entered.content
    dispute_id = entered.json()["data"]["dispute_id"]
    admitted = client.post(
        f"/api/v1/disputes/{dispute_id}/evidence",
        {"ref": "tracking-1", "sha256": "0" * 64, "kind": "delivery", "summary": "Delivered."},
        format="json",
    )
    assert admitted.status_code == 201
    packet = admitted.json()["data"]["dispute"]["packet"]
    packet_schema = _component(schema, "#/components/schemas/PacketOut")
    ref_schema = _component(schema, packet_schema["properties"]["evidence_refs"]["items"]["$ref"])
    (cited,) = packet["evidence_refs"]
    assert set(cited) == set(ref_schema["required"]) == {"ref", "sha256", "kind", "summary"}
    assert set(ref_schema["properties"]) == set(ref_schema["required"]) | {"file"}
    file_schema = _component(schema, ref_schema["properties"]["file"]["allOf"][0]["$ref"])
    assert set(file_schema["properties"]) == {"name", "size", "type"}


def _buyer() -> Client:
    """A buyer with a verified e-mail address (the money routes need it)."""
    client = Client()
    user = User.objects.create_user(username=f"buyer{User.objects.count()}")
    email_address_verify(user=user, email=f"{user.username}@example.test")
    client.force_login(user)
    return client
