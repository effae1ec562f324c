"""The staff API of disputes: list and filters, detail with the current packet, evidence admission
with a code per broken rule (changing nothing), preparing again, access and idempotency."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue
from disputes.models import Dispute, Evidence, Packet
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.disputes import Ops, World, evidence, staff_user
from tests.drivers.disputes37 import StripeDisputes

SHA = hashlib.sha256(b"doc").hexdigest()


@pytest.fixture
def clerk(db: None, stripe_at_sandbox: SandboxControl) -> Api:
    """Staff, with the provider at the sandbox (a dispute entered is read from the provider first,
    and the provider is told, if it holds the dispute, to take its evidence manually). The
    disputes it enters are opened at the sandbox first, each known by a name (`clerk.stripe`)."""
    # The dispute clerk: reads disputes, enters them, admits evidence, asks for packets (the
    # same permissions the admin asks, disputes/permissions.py).
    api = Api(staff_user("clerk", "view_dispute", "add_dispute", "add_evidence", "change_packet"))
    api.stripe = StripeDisputes(stripe_at_sandbox)  # type: ignore[attr-defined]
    return api


def enter(api: Api, dispute_id: str = "dp_manual_1", **changes: Any) -> Any:
    """Enter the dispute named `dispute_id`, opened at the provider for $5.00 on a charge of its
    own, as Stripe shows it (what is typed agrees, unless `changes` say otherwise)."""
    options = {"response_allowed": False} if changes.get("response_deadline", "") is None else {}
    real, charge = api.stripe.open(dispute_id, **options)  # type: ignore[attr-defined]
    body = {
        "dispute_id": real,
        "charge_id": charge,
        "amount_micro": 5_000_000,
        "reason": "product_not_received",
        **changes,
    }
    return api.post("/api/v1/disputes", body)


def test_staff_enter_a_dispute_and_get_a_prepared_packet(clerk: Api) -> None:
    response = enter(clerk)
    assert response.status_code == 201, response.content
    data = response.json()["data"]
    assert data["provider_dispute_id"] == clerk.stripe.id("dp_manual_1")  # type: ignore[attr-defined]
    assert (data["amount_micro"], data["amount_usd"]) == (5_000_000, 5.0)
    packet = data["packet"]
    # No receipt of this charge in Vouch's history: nothing can be proven.
    assert packet["posture"] == "needs_more_evidence"
    assert packet["status"] == "incomplete"
    assert any("charge_receipt_missing" in q for q in packet["open_questions"])
    assert packet["filing"]["status"] == "not_filed"
    assert packet["filing"]["provider_status"] == "not_called"
    assert packet["approval"]["status"] == "not_requested"
    assert packet["contributors"] == ["clerk"]  # who entered it asked for it
    again = enter(clerk)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "dispute_already_recorded"
    assert Dispute.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"amount_micro": -5}, "validation_error"),
        ({"amount_micro": "5000000"}, "validation_error"),
        ({"amount_micro": 5_000_001}, "validation_error"),
        ({"currency": "eur"}, "unsupported_currency"),
        ({"unexpected": 1}, "validation_error"),
        ({"response_deadline": "soon"}, "validation_error"),
        ({"amount_micro": 2**70}, "validation_error"),
        ({"reason": "x" * 61}, "validation_error"),
    ],
)
def test_entering_a_bad_dispute_changes_nothing(clerk: Api, changes: Any, code: str) -> None:
    response = enter(clerk, **changes)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert not Dispute.objects.exists()


def test_entering_an_empty_or_non_object_body_changes_nothing(clerk: Api) -> None:
    for body in ({}, [], "dp_1"):
        response = clerk.post("/api/v1/disputes", body)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "validation_error"
    assert not Dispute.objects.exists()


def test_list_filters_and_deadline_order(clerk: Api, stripe_at_sandbox: SandboxControl) -> None:
    """Deadlines as Stripe shows them (`evidence_details.due_by`): the one opened a day later is
    due a day later, and one the network allows no response to has none."""
    enter(clerk, "dp_soon")
    stripe_at_sandbox.advance_clock(86_400)
    enter(clerk, "dp_late")
    enter(clerk, "dp_none", response_deadline=None)
    names = {clerk.stripe.id(n): n for n in ("dp_soon", "dp_late", "dp_none")}  # type: ignore[attr-defined]
    listed = clerk.get("/api/v1/disputes").json()["data"]
    assert [names[d["provider_dispute_id"]] for d in listed["results"]] == [
        "dp_soon",
        "dp_late",
        "dp_none",
    ]
    assert listed["count"] == 3
    late = clerk.stripe.id("dp_late")  # type: ignore[attr-defined]
    by_id = clerk.get(f"/api/v1/disputes?dispute_id={late}").json()["data"]["results"]
    assert [d["provider_dispute_id"] for d in by_id] == [late]
    charge = clerk.stripe.opened["dp_soon"][1]  # type: ignore[attr-defined]
    by_charge = clerk.get(f"/api/v1/disputes?charge={charge}").json()["data"]["results"]
    assert [names[d["provider_dispute_id"]] for d in by_charge] == ["dp_soon"]
    public = listed["results"][0]["dispute_id"]
    for ref in (public, clerk.stripe.id("dp_soon")):  # type: ignore[attr-defined]
        assert clerk.get(f"/api/v1/disputes/{ref}").json()["data"]["dispute_id"] == public


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({**evidence("doc:1", "delivery"), "raw": "x"}, "evidence_unknown_field"),
        ({"ref": "doc:1", "kind": "delivery", "summary": "s"}, "evidence_missing_field"),
        (
            {**evidence("doc:1", "delivery"), "summary": {"object": "charge"}},
            "evidence_raw_payload",
        ),
        (
            {**evidence("doc:1", "delivery"), "summary": '{"id": "ch_1", "object": "charge"}'},
            "evidence_raw_payload",
        ),
        ({**evidence("doc:1", "delivery"), "sha256": "abc"}, "evidence_invalid_sha256"),
        ({**evidence("doc:1", "delivery"), "sha256": SHA.upper()}, "evidence_invalid_sha256"),
        ({**evidence("doc:1", "receipt")}, "evidence_invalid_kind"),
        ({**evidence("doc:1", "delivery"), "summary": "x" * 501}, "evidence_too_long"),
        ({**evidence("doc:1", "delivery"), "summary": ""}, "evidence_too_long"),
        ({**evidence("doc 1", "delivery")}, "evidence_invalid_ref"),
        ({**evidence("d" * 201, "delivery")}, "evidence_invalid_ref"),
        (
            {**evidence("doc:1", "consent"), "summary": "key sk_live_51HabcDEF123"},
            "evidence_credential",
        ),
        ({**evidence("doc:1", "consent"), "summary": "whsec_abcdef123456"}, "evidence_credential"),
        (
            {**evidence("doc:1", "consent"), "summary": "Authorization: Bearer abcdefgh12345"},
            "evidence_credential",
        ),
        ({**evidence("doc:1", "consent"), "summary": "password: hunter22"}, "evidence_credential"),
        ({**evidence("https://u:p@host/x", "consent")}, "evidence_credential"),
        (
            {**evidence("doc:1", "consent"), "summary": "card 4242 4242 4242 4242"},
            "evidence_card_number",
        ),
        ({**evidence("doc:1", "other"), "receipt_id": "rcpt_x"}, "receipt_detail_refused"),
        ({**evidence("rcpt_" + "1" * 64, "other")}, "receipt_detail_refused"),
        # Issue 37: an adjustment is cited as a refund made, from the ledger, never admitted.
        ({**evidence("adj_" + "1" * 24, "other")}, "receipt_detail_refused"),
        ({**evidence("doc:1", "delivery"), "ref": 12}, "evidence_refused"),
        ([evidence("doc:1", "delivery")], "validation_error"),  # a body is an object (item 7)
    ],
)
def test_evidence_refused_names_the_rule_and_changes_nothing(
    clerk: Api, body: Any, code: str
) -> None:
    public = enter(clerk).json()["data"]["dispute_id"]
    response = clerk.post(f"/api/v1/disputes/{public}/evidence", body, key="ev-1")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert not Evidence.objects.exists()
    # Not stored under the key: the corrected request goes through with the same key.
    fixed = clerk.post(
        f"/api/v1/disputes/{public}/evidence", evidence("doc:1", "delivery"), key="ev-1"
    )
    assert fixed.status_code == 201, fixed.content


def test_evidence_admitted_once_and_a_changed_ref_is_a_conflict(clerk: Api) -> None:
    public = enter(clerk).json()["data"]["dispute_id"]
    url = f"/api/v1/disputes/{public}/evidence"
    first = clerk.post(url, evidence("doc:1", "delivery"))
    assert first.status_code == 201
    assert first.json()["data"]["evidence"]["admitted_by"] == "clerk"
    assert clerk.post(url, evidence("doc:1", "delivery")).status_code == 200
    changed = clerk.post(url, evidence("doc:1", "delivery", "Another summary"))
    assert changed.status_code == 409
    assert changed.json()["error"]["code"] == "evidence_ref_conflict"
    assert Evidence.objects.count() == 1
    replay = clerk.post(url, evidence("doc:2", "delivery"), key="k-2")
    again = clerk.post(url, evidence("doc:2", "delivery"), key="k-2")
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == replay.content
    conflict = clerk.post(url, evidence("doc:3", "delivery"), key="k-2")
    assert conflict.json()["error"]["code"] == "idempotency_key_conflict"


def test_prepare_again_refuses_receipts_from_the_caller(clerk: Api) -> None:
    public = enter(clerk).json()["data"]["dispute_id"]
    url = f"/api/v1/disputes/{public}/packet"
    forged = {"receipts": [{"id": "rcpt_" + "0" * 64, "amount_micro": 5_000_000}]}
    refused = clerk.post(url, forged)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "receipt_detail_refused"
    assert clerk.post(url, {"posture": "contest"}).json()["error"]["code"] == "validation_error"
    assert Packet.objects.count() == 1
    prepared = clerk.post(url, {})
    assert prepared.status_code == 201
    assert prepared.json()["data"]["packet"]["version"] == 2
    assert Packet.objects.filter(status="superseded").count() == 1


def test_only_staff_and_before_any_lookup(clerk: Api, db: None) -> None:
    public = enter(clerk).json()["data"]["dispute_id"]
    buyer = Api(User.objects.create_user("buyer", "b@example.com", "pw-buyer-123"))
    for path in ("/api/v1/disputes", f"/api/v1/disputes/{public}", "/api/v1/disputes/dsp_missing"):
        response = buyer.get(path)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"
    for suffix in ("evidence", "packet"):
        for target in (public, "dsp_missing"):
            response = buyer.post(f"/api/v1/disputes/{target}/{suffix}", evidence("doc:9", "other"))
            assert response.status_code == 403
    assert APIClient().get("/api/v1/disputes").status_code == 401
    for suffix in ("evidence", "packet"):
        unknown = clerk.post(f"/api/v1/disputes/dsp_missing/{suffix}", evidence("doc:9", "other"))
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "not_found"
    assert not Evidence.objects.exists()
    missing = clerk.get("/api/v1/disputes/dsp_missing")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    no_csrf = clerk.post(f"/api/v1/disputes/{public}/packet", {}, csrf=False)
    assert no_csrf.status_code == 403
    assert no_csrf.json()["error"]["code"] == "csrf_failed"


def test_a_staff_token_reads_disputes(clerk: Api, ops: Ops) -> None:
    enter(clerk)
    _, raw = api_token_issue(user=clerk.user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/disputes").json()["data"]["count"] == 1


def test_a_dispute_arriving_from_the_provider_is_prepared(world: World) -> None:
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    assert dispute.source == "provider"
    assert dispute.amount_micro == 10_000_000
    assert dispute.response_deadline is not None
    assert dispute.packets.count() == 1
    # A later event for the same dispute records what changed and prepares nothing new.
    world.sandbox.set_dispute_status(dispute.provider_dispute_id, "warning_needs_response")
    from disputes import services

    services.dispute_on_provider_event(
        event={
            "type": "charge.dispute.updated",
            "data": {"object": {"id": dispute.provider_dispute_id}},
        }
    )
    dispute.refresh_from_db()
    assert dispute.provider_status == "warning_needs_response"
    assert dispute.packets.count() == 1


def post_raw(api: Api, path: str, raw: str, *, key: str | None = None) -> Any:
    """A POST whose body is exactly `raw` (JSON text), as a client could send it."""
    headers = {"HTTP_X_CSRFTOKEN": api.csrf}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return api.client.generic("POST", path, raw, content_type="application/json", **headers)


@pytest.mark.parametrize("raw", ["null", "[]", "0", '"all"'])
def test_a_body_that_is_not_an_object_is_a_validation_error_on_every_endpoint(
    clerk: Api, raw: str
) -> None:
    """Issue 10 item 7: only an absent body or `{}` is "empty"; `null`, `[]`, `0` and `"all"` are
    400 `validation_error` everywhere, change nothing and store nothing under the key."""
    public = enter(clerk).json()["data"]["dispute_id"]
    before = (Dispute.objects.count(), Evidence.objects.count(), Packet.objects.count())
    for path in (
        "/api/v1/disputes",
        f"/api/v1/disputes/{public}/evidence",
        f"/api/v1/disputes/{public}/packet",
    ):
        response = post_raw(clerk, path, raw, key=f"raw-{raw}")
        assert response.status_code == 400, (path, response.content)
        assert response.json()["error"]["code"] == "validation_error", (path, response.content)
    assert (Dispute.objects.count(), Evidence.objects.count(), Packet.objects.count()) == before
    # An absent body is `{}`: preparing again takes it.
    assert post_raw(clerk, f"/api/v1/disputes/{public}/packet", "").status_code == 201


def test_one_key_runs_an_operation_once_whichever_id_names_the_dispute(clerk: Api) -> None:
    """Issue 10 item 13: `dsp_…` and `dp_…` name one dispute, so one operation: the second
    request with the same key and body replays the first, under either name."""
    public = enter(clerk).json()["data"]["dispute_id"]
    names = (public, clerk.stripe.id("dp_manual_1"))  # type: ignore[attr-defined]
    first = clerk.post(f"/api/v1/disputes/{names[0]}/packet", {}, key="prep-1")
    assert first.status_code == 201, first.content
    again = clerk.post(f"/api/v1/disputes/{names[1]}/packet", {}, key="prep-1")
    assert again.status_code == 201
    assert again.get("Idempotent-Replayed") == "true"
    assert again.content == first.content
    assert Packet.objects.count() == 2  # the entry's version and one more, not two more

    body = evidence("doc:1", "delivery")
    admitted = clerk.post(f"/api/v1/disputes/{names[1]}/evidence", body, key="ev-1")
    assert admitted.status_code == 201, admitted.content
    replayed = clerk.post(f"/api/v1/disputes/{names[0]}/evidence", body, key="ev-1")
    assert (replayed.status_code, replayed.get("Idempotent-Replayed")) == (201, "true")
    assert replayed.content == admitted.content
    assert Evidence.objects.count() == 1


def test_a_dispute_amount_beyond_stripes_largest_is_refused_not_a_500(db: None) -> None:
    """Found by schemathesis: 6,785,438,252,587,870,000 micro reached the packet digest (RFC 8785
    refuses integers past 2^53) and answered 500."""
    from disputes import services
    from disputes.services import MAX_DISPUTE_MICRO

    assert MAX_DISPUTE_MICRO == 999_999_990_000
    assert MAX_DISPUTE_MICRO < 2**53
    from core.exceptions import InvalidInput

    with pytest.raises(InvalidInput, match="at most"):
        services.dispute_enter(
            actor=None,
            data={
                "charge_id": "ch_x",
                "dispute_id": "dp_x",
                "amount_micro": MAX_DISPUTE_MICRO + 10_000,
                "currency": "usd",
                "reason": "fraudulent",
                "response_deadline": "2026-12-31T00:00:00+00:00",
            },
            idempotency=None,
        )
