"""Evidence admitted from the dispute's admin page (issue 13): ref, kind, summary and a file whose
SHA-256 Vouch computes (or, without a file, the SHA-256 as given), through the one admission
service and its rules; the file is opened from the packet review page through an admin view that
streams it to whoever may read disputes — never a public media URL."""

from __future__ import annotations

import hashlib
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from accounts.models import User
from core.models import AuditEvent
from disputes.models import Dispute, Evidence
from tests.drivers.disputes import Ops, World, current, pdf, staff_user

from .test_admin import messages_of, page, section

pytestmark = pytest.mark.usefixtures("media")


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def admit_url(dispute: Dispute) -> str:
    return reverse("admin:disputes_dispute_admit", args=[dispute.pk])


def dispute_page(client: Client, dispute: Dispute) -> str:
    response = client.get(reverse("admin:disputes_dispute_change", args=[dispute.pk]))
    assert response.status_code == 200
    return unescape(response.content.decode())


@pytest.fixture
def admitter(db: None) -> User:
    return staff_user("eve", "add_evidence", "view_dispute", "view_evidence")


@pytest.fixture
def dispute(world: World) -> Dispute:
    world.fund()
    return world.dispute(reason="product_not_received")


def test_a_file_admitted_through_the_form_is_bound_by_its_sha256_and_opens_from_the_review_page(
    dispute: Dispute, admitter: User, ops: Ops
) -> None:
    content = pdf("Signed for by J. Doe")
    client = client_for(admitter)
    assert 'id="act-admit-evidence"' in dispute_page(client, dispute)
    response = client.post(
        admit_url(dispute),
        {
            "evidence-ref": "pod:signed",
            "evidence-kind": "delivery",
            "evidence-summary": "Signed proof of delivery",
            "evidence-file": SimpleUploadedFile("signed.pdf", content, "application/pdf"),
        },
        follow=True,
    )
    sha256 = hashlib.sha256(content).hexdigest()
    assert any(f"Evidence pod:signed is admitted (delivery, sha256 {sha256})" in m for m in
               messages_of(response))  # fmt: skip
    evidence = Evidence.objects.get(dispute=dispute, ref="pod:signed")
    assert (evidence.sha256, evidence.file_name, evidence.admitted_by) == (
        sha256,
        "signed.pdf",
        admitter,
    )
    event = AuditEvent.objects.get(action="dispute.evidence_admit")
    assert event.details["file"] == {"name": "signed.pdf", "size": len(content), "type": "pdf"}
    packet = current(dispute)
    assert packet.posture == "contest"
    assert admitter in packet.contributors.all()  # four eyes: the admitter contributes

    # The review page links the evidence ref to the file; the link streams the bytes.
    html = section(page(client_for(ops.approver), packet), "packet-evidence")
    file_url = reverse("admin:disputes_evidence_file", args=[evidence.pk])
    assert f'href="{file_url}"' in html
    served = client_for(ops.approver).get(file_url)
    assert served.status_code == 200
    assert served["Content-Type"] == "application/pdf"
    assert {"private", "no-store"} <= {d.strip() for d in served["Cache-Control"].split(",")}
    assert b"".join(served) == content
    # Never a public media URL.
    assert Client().get(f"/media/{evidence.file.name}").status_code == 404
    assert client_for(ops.approver).get(f"/media/{evidence.file.name}").status_code == 404


def test_without_a_file_the_sha256_is_entered_and_the_rules_hold(
    dispute: Dispute, admitter: User
) -> None:
    client = client_for(admitter)
    response = client.post(
        admit_url(dispute),
        {
            "evidence-ref": "doc:1",
            "evidence-kind": "delivery",
            "evidence-summary": "Courier scan held in the warehouse system",
            "evidence-sha256": "a" * 64,
        },
        follow=True,
    )
    assert any("Evidence doc:1 is admitted" in m for m in messages_of(response))
    assert not Evidence.objects.get(ref="doc:1").file

    refused = client.post(
        admit_url(dispute),
        {
            "evidence-ref": "doc:2",
            "evidence-kind": "delivery",
            "evidence-summary": "api_key: sk_live_abcdef1234567890",
            "evidence-sha256": "b" * 64,
        },
        follow=True,
    )
    assert any(
        m.startswith("Not admitted: ") and m.endswith("(details: evidence_credential)")
        for m in messages_of(refused)
    )
    missing = client.post(
        admit_url(dispute),
        {"evidence-ref": "doc:3", "evidence-kind": "delivery", "evidence-summary": "No hash"},
        follow=True,
    )
    assert any(
        m.startswith("Not admitted: ") and m.endswith("(details: evidence_missing_field)")
        for m in messages_of(missing)
    )
    bad_type = client.post(
        admit_url(dispute),
        {
            "evidence-ref": "doc:4",
            "evidence-kind": "delivery",
            "evidence-summary": "A program",
            "evidence-file": SimpleUploadedFile("tool.exe", b"MZ\x90\x00", "application/x-exe"),
        },
        follow=True,
    )
    assert any(
        m.startswith("Not admitted: ") and m.endswith("(details: evidence_file_type)")
        for m in messages_of(bad_type)
    )
    assert sorted(Evidence.objects.values_list("ref", flat=True)) == ["doc:1"]


def test_admitting_and_reading_files_need_their_permissions(dispute: Dispute, ops: Ops) -> None:
    reader = staff_user("rita", "view_dispute")
    assert 'id="act-admit-evidence"' not in dispute_page(client_for(reader), dispute)
    post = client_for(reader).post(
        admit_url(dispute),
        {
            "evidence-ref": "pod:1",
            "evidence-kind": "delivery",
            "evidence-summary": "POD",
            "evidence-file": SimpleUploadedFile("pod.pdf", pdf(), "application/pdf"),
        },
    )
    assert post.status_code == 403
    assert not Evidence.objects.exists()

    admitter = staff_user("eve", "add_evidence", "view_dispute")
    client_for(admitter).post(
        admit_url(dispute),
        {
            "evidence-ref": "pod:1",
            "evidence-kind": "delivery",
            "evidence-summary": "POD",
            "evidence-file": SimpleUploadedFile("pod.pdf", pdf(), "application/pdf"),
        },
    )
    evidence = Evidence.objects.get(ref="pod:1")
    file_url = reverse("admin:disputes_evidence_file", args=[evidence.pk])
    nobody = staff_user("nora")  # staff, but no disputes permission
    assert client_for(nobody).get(file_url).status_code == 403
    buyer = User.objects.create_user("bob", "bob@example.com", "pw-bob-123")
    assert client_for(buyer).get(file_url).status_code in (302, 403)
    assert Client().get(file_url).status_code == 302  # to the login page
    assert client_for(ops.approver).get(file_url).status_code == 200
