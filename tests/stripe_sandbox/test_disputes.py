"""Disputes and evidence files through the official SDK."""

import io

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def named(content: bytes, name: str) -> io.BytesIO:
    """A file object as the SDK uploads it: its `name` becomes the upload's filename."""
    handle = io.BytesIO(content)
    handle.name = name
    return handle


def _dispute(
    client: stripe.StripeClient, sandbox: SandboxControl, reason: str = "product_not_received"
) -> str:
    return str(sandbox.open_dispute(paid_charge(client, 5000), reason=reason)["id"])


def test_control_api_opens_a_dispute_due_in_seven_days(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 5000)
    opened = sandbox.open_dispute(charge_id, reason="fraudulent", amount=3000)
    dispute = client.v1.disputes.retrieve(opened["id"])
    assert dispute.id.startswith("dp_")
    assert (dispute.status, dispute.reason, dispute.amount, dispute.charge) == (
        "needs_response",
        "fraudulent",
        3000,
        charge_id,
    )
    assert dispute.evidence_details.due_by - dispute.created == 7 * 24 * 3600
    assert dispute.evidence_details.submission_count == 0
    assert client.v1.charges.retrieve(charge_id).disputed is True
    created = client.v1.events.list(params={"type": "charge.dispute.created"}).data
    assert [e.data.object.id for e in created] == [dispute.id]


def test_create_dispute_test_card_is_disputed(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 2000, pm="pm_card_createDispute")
    disputes = client.v1.disputes.list(params={"charge": charge_id}).data
    assert len(disputes) == 1
    assert disputes[0].reason == "fraudulent"


def test_list_disputes_by_charge(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    first = _dispute(client, sandbox)
    second = _dispute(client, sandbox)
    assert [d.id for d in client.v1.disputes.list().data] == [second, first]
    charge_id = client.v1.disputes.retrieve(first).charge
    assert [d.id for d in client.v1.disputes.list(params={"charge": charge_id}).data] == [first]


def test_stage_evidence_then_submit_once(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _dispute(client, sandbox)
    upload = client.v1.files.create(
        params={"purpose": "dispute_evidence", "file": named(PNG, "proof.png")}
    )
    staged = client.v1.disputes.update(
        dispute_id,
        params={
            "evidence": {"shipping_tracking_number": "1Z999", "shipping_documentation": upload.id},
            "metadata": {"vouch_packet_digest": "abc123"},
            "submit": False,
        },
    )
    assert staged.status == "needs_response"
    assert staged.evidence.shipping_tracking_number == "1Z999"
    assert staged.evidence.shipping_documentation == upload.id
    assert staged.evidence_details.has_evidence is True
    assert staged.evidence_details.submission_count == 0

    expanded = client.v1.disputes.retrieve(
        dispute_id, params={"expand": ["evidence.shipping_documentation"]}
    )
    assert expanded.evidence.shipping_documentation.id == upload.id  # the File itself
    assert expanded.evidence.shipping_documentation.filename == "proof.png"

    submitted = client.v1.disputes.update(dispute_id, params={"submit": True})
    assert submitted.status == "under_review"
    assert submitted.evidence_details.submission_count == 1
    assert submitted.metadata.to_dict() == {"vouch_packet_digest": "abc123"}

    with pytest.raises(stripe.InvalidRequestError):
        client.v1.disputes.update(dispute_id, params={"submit": True})
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.disputes.update(
            dispute_id, params={"evidence": {"uncategorized_text": "late"}, "submit": False}
        )
    again = client.v1.disputes.retrieve(dispute_id)
    assert again.evidence_details.submission_count == 1
    assert again.evidence.uncategorized_text is None


@pytest.mark.parametrize(
    ("field", "limit"), [("uncategorized_text", 20_000), ("shipping_tracking_number", 5_000)]
)
def test_each_evidence_text_field_has_stripes_bound(
    client: stripe.StripeClient, sandbox: SandboxControl, field: str, limit: int
) -> None:
    dispute_id = _dispute(client, sandbox)
    with pytest.raises(stripe.InvalidRequestError, match=f"at most {limit} characters"):
        client.v1.disputes.update(
            dispute_id, params={"evidence": {field: "x" * (limit + 1)}, "submit": False}
        )
    assert client.v1.disputes.retrieve(dispute_id).evidence[field] is None
    staged = client.v1.disputes.update(
        dispute_id, params={"evidence": {field: "x" * limit}, "submit": False}
    )
    assert len(staged.evidence[field]) == limit


def test_update_without_submit_submits_as_stripe_does(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _dispute(client, sandbox)
    updated = client.v1.disputes.update(
        dispute_id, params={"evidence": {"uncategorized_text": "hello"}}
    )
    assert updated.status == "under_review"
    assert updated.evidence_details.submission_count == 1


@pytest.mark.parametrize(
    ("evidence", "code"),
    [
        ({"not_a_field": "x"}, "parameter_unknown"),
        ({"receipt": "file_missing"}, "resource_missing"),
    ],
)
def test_bad_evidence_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, evidence: dict, code: str
) -> None:
    dispute_id = _dispute(client, sandbox)
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.disputes.update(dispute_id, params={"evidence": evidence, "submit": True})
    assert raised.value.code == code
    assert client.v1.disputes.retrieve(dispute_id).status == "needs_response"


def test_close_loses_the_dispute(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    dispute_id = _dispute(client, sandbox)
    closed = client.v1.disputes.close(dispute_id)
    assert closed.status == "lost"
    assert [e.type for e in client.v1.events.list(params={"type": "charge.dispute.*"}).data] == [
        "charge.dispute.closed",
        "charge.dispute.funds_withdrawn",
        "charge.dispute.created",
    ]
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.disputes.close(dispute_id)


@pytest.mark.parametrize(
    ("status", "event_types"),
    [
        ("won", ["charge.dispute.funds_reinstated", "charge.dispute.closed"]),
        ("lost", ["charge.dispute.closed"]),
        ("under_review", ["charge.dispute.updated"]),
    ],
)
def test_control_api_moves_a_dispute(
    client: stripe.StripeClient, sandbox: SandboxControl, status: str, event_types: list[str]
) -> None:
    dispute_id = _dispute(client, sandbox)
    sandbox.set_dispute_status(dispute_id, status)
    assert client.v1.disputes.retrieve(dispute_id).status == status
    latest = client.v1.events.list(params={"limit": len(event_types) + 1}).data
    assert [e.type for e in latest] == [*event_types, "charge.dispute.funds_withdrawn"]
    assert {e.data.object.id for e in latest} == {dispute_id}
    moved = latest[len(event_types) - 1]
    assert moved.data.previous_attributes.status == "needs_response"


def test_file_upload_and_retrieve(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    upload = client.v1.files.create(
        params={"purpose": "dispute_evidence", "file": named(b"%PDF-1.4 test", "receipt.pdf")}
    )
    assert upload.id.startswith("file_")
    assert (upload.purpose, upload.type, upload.size, upload.filename) == (
        "dispute_evidence",
        "pdf",
        13,
        "receipt.pdf",
    )
    fetched = client.v1.files.retrieve(upload.id)
    assert fetched.id == upload.id
    assert fetched.url.startswith(sandbox.url)
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 - the sandbox's own URL
        fetched.url, headers={"Authorization": "Bearer sk_test_x"}
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the sandbox's own URL
        assert response.read() == b"%PDF-1.4 test"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"purpose": "selfie", "file": ("a.png", PNG)}, "purpose"),
        ({"purpose": "dispute_evidence", "file": ("run.exe", b"MZ")}, "file type"),
        ({"purpose": "dispute_evidence"}, "file"),
    ],
)
def test_bad_uploads_are_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, params: dict, message: str
) -> None:
    if "file" in params:
        name, content = params["file"]
        params = {**params, "file": named(content, name)}
    with pytest.raises(stripe.InvalidRequestError, match=message):
        client.v1.files.create(params=params)
    assert sandbox.state()["counts"]["files"] == 0
