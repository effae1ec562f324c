"""The ops admin for disputes (SPEC §10): disputes deadline first, the packet review page with
what it cites and why it is valid, and its acts (Approve, File, Edit, Prepare again), each a POST
guarded by its permission that shows the service's answer or its refusal's stable code."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from core.models import AuditEvent
from disputes import services
from disputes.models import Dispute, Packet
from tests.drivers.disputes import Ops, World, contest_ready, staff_user
from tests.helpers import settle_runs


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def review_url(packet: Packet) -> str:
    return reverse("admin:disputes_packet_review", args=[packet.pk])


def act_url(packet: Packet, act: str) -> str:
    return reverse(f"admin:disputes_packet_{act}", args=[packet.pk])


def page(client: Client, packet: Packet) -> str:
    response = client.get(review_url(packet))
    assert response.status_code == 200
    return response.content.decode()


def section(html: str, element_id: str) -> str:
    """One module of the page, by its id (up to the next module), its entities unescaped."""
    start = html.index(f'id="{element_id}"')
    end = html.find('<div class="module', start + 1)
    return unescape(html[start : end if end != -1 else len(html)])


def messages_of(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


def approve_via_page(client: Client, packet: Packet, digest: str | None = None) -> object:
    return client.post(
        act_url(packet, "approve"),
        {"approve-digest": digest or packet.digest, "approve-confirm": "on"},
        follow=True,
    )


@pytest.fixture
def packet(world: World, ops: Ops) -> Packet:
    return contest_ready(world, ops)


# --- the disputes changelist ------------------------------------------------------------------


def test_the_changelist_puts_the_nearest_deadline_first(packet: Packet, ops: Ops) -> None:
    soon, late = timezone.now() + timedelta(days=1), timezone.now() + timedelta(days=30)
    for dispute_id, deadline in (("dp_late", late), ("dp_none", None), ("dp_soon", soon)):
        services.dispute_record(
            fields={
                "provider_dispute_id": dispute_id,
                "charge_id": f"ch_{dispute_id}",
                "amount_micro": 2_500_000,
                "reason": "general",
                "response_deadline": deadline,
            },
            source="staff",
        )
    real = packet.dispute  # the sandbox's deadline: 7 days from now
    assert real.response_deadline is not None
    assert soon < real.response_deadline < late

    response = client_for(ops.approver).get(reverse("admin:disputes_dispute_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    ids = ["dp_soon", real.provider_dispute_id, "dp_late", "dp_none"]
    positions = [html.index(f">{dispute_id}<") for dispute_id in ids]
    assert positions == sorted(positions), "deadline first, disputes without a deadline last"

    # The real dispute's row: its charge, the amount in micro-dollars and dollars, and its
    # current packet's state, linked to the review page.
    row = html[positions[1] : positions[2]]
    for text in (real.charge_id, "10,000,000", "$10.00", "Product not received", "Contest the"):
        assert text in row
    assert "product_not_received" in row  # the code beside the words
    assert "Ready for review" in row
    assert "not approved" in row
    assert "not filed" in row
    assert f'href="{review_url(packet)}"' in row

    # Search by charge id and by provider dispute id.
    for query in (real.charge_id, real.provider_dispute_id):
        found = client_for(ops.approver).get(
            reverse("admin:disputes_dispute_changelist"), {"q": query}
        )
        assert real.provider_dispute_id in found.content.decode()
        assert "dp_soon" not in found.content.decode()


def test_the_dispute_page_shows_its_evidence_and_packet_versions(packet: Packet, ops: Ops) -> None:
    dispute = packet.dispute
    html = client_for(ops.approver).get(reverse("admin:disputes_dispute_change", args=[dispute.pk]))
    assert html.status_code == 200
    text = html.content.decode()
    assert text.count('class="vouch-evidence"') == 1
    assert "doc:1" in text
    assert packet.dispute.evidence.get().sha256 in text
    # Two versions: the one the system prepared on the event (needs evidence), and the contest.
    assert text.count('class="vouch-version"') == 2
    assert f'href="{review_url(packet)}"' in text
    assert "A person decides" in text


# --- the review page --------------------------------------------------------------------------


def test_the_review_page_shows_what_the_packet_says_cites_and_whether_it_is_valid(
    packet: Packet, ops: Ops
) -> None:
    html = page(client_for(ops.approver), packet)
    assert 'id="posture">Contest the dispute<' in html
    assert section(html, "packet-identity").count(packet.digest) == 1  # the full digest

    # Citations: the charge receipt, linked to its admin page, and the evidence with its kind,
    # SHA-256 and summary.
    receipt_id = packet.receipt_ids[0]
    assert receipt_id.startswith("rcpt_")
    assert packet.citations == [receipt_id, "doc:1"]
    citations = section(html, "packet-citations")
    assert f'href="/admin/receipts/receipt/{quote(receipt_id)}/change/"' in citations
    evidence = packet.evidence_refs[0]
    for text in ("doc:1", "delivery", evidence["sha256"], "Signed delivery confirmation"):
        assert text in citations

    # Validation, open questions, the approval not yet given, nothing filed.
    assert "Deterministic finalization found nothing wrong" in section(html, "packet-validation")
    assert "None." in section(html, "packet-questions")
    assert "not approved" in section(html, "packet-approval")
    assert "not filed" in section(html, "packet-filing")
    # The exact request filing would send, with the digest in its metadata.
    handoff = section(html, "packet-handoff")
    assert '"vouch_packet_digest": "' + packet.digest + '"' in handoff
    assert '"submit": true' in handoff

    # The approver is offered Approve, confirming the digest shown; not File (not approved),
    # not Edit (no permission).
    assert f'name="approve-digest" value="{packet.digest}"' in html
    assert f"I approve this packet with digest {packet.digest[:16]}…" in html
    assert 'id="act-file"' not in html
    assert 'id="act-edit"' not in html


def test_the_receipt_link_opens_the_receipt(packet: Packet) -> None:
    root = User.objects.create_superuser("root", "root@example.com", "root-pw-123")
    html = page(client_for(root), packet)
    url = re.search(r'href="(/admin/receipts/receipt/[^"]+)"', html)
    assert url is not None
    response = client_for(root).get(url.group(1))
    assert response.status_code == 200
    assert packet.receipt_ids[0] in response.content.decode()


# --- Approve ----------------------------------------------------------------------------------


def test_an_approver_who_did_not_contribute_approves_through_the_page(
    packet: Packet, ops: Ops
) -> None:
    response = approve_via_page(client_for(ops.approver), packet)
    assert response.redirect_chain == [(review_url(packet), 302)]  # type: ignore[attr-defined]
    assert any(f"approved by ada with digest {packet.digest}" in m for m in messages_of(response))
    packet.refresh_from_db()
    assert packet.approval_status == "approved"
    assert (packet.approved_by, packet.approved_digest) == (ops.approver, packet.digest)
    event = AuditEvent.objects.get(action="packet.approve")
    assert (event.actor, event.details["digest"]) == (ops.approver, packet.digest)

    html = response.content.decode()  # type: ignore[attr-defined]
    approval = section(html, "packet-approval")
    assert "ada" in approval
    assert packet.digest in approval
    assert "DRIFTED" not in html
    assert 'id="act-approve"' not in html  # approved once is enough


def test_the_preparer_is_refused_as_a_contributor(packet: Packet, ops: Ops) -> None:
    assert ops.preparer.has_perm("disputes.approve_packet")
    client = client_for(ops.preparer)
    assert "You contributed to this version" in page(client, packet)
    response = approve_via_page(client, packet)
    assert any(
        "approver_is_contributor" in m and "another person must approve" in m
        for m in messages_of(response)
    )
    packet.refresh_from_db()
    assert packet.approval_status == "not_requested"


def test_without_the_permission_there_is_no_button_and_a_post_is_forbidden(
    packet: Packet, ops: Ops
) -> None:
    filer = client_for(ops.filer)  # may file, may not approve
    html = page(filer, packet)
    assert 'id="act-approve"' not in html
    assert 'id="act-file"' not in html  # and nothing to file before an approval
    response = filer.post(
        act_url(packet, "approve"),
        {"approve-digest": packet.digest, "approve-confirm": "on"},
    )
    assert response.status_code == 403
    # A staff member with no disputes permission cannot even read the packet.
    nobody = client_for(staff_user("nik"))
    assert nobody.get(review_url(packet)).status_code == 403
    assert nobody.post(act_url(packet, "file"), {}).status_code == 403
    packet.refresh_from_db()
    assert packet.approval_status == "not_requested"


def test_an_approval_needs_the_csrf_token(packet: Packet, ops: Ops) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ops.approver)
    response = client.post(
        act_url(packet, "approve"), {"approve-digest": packet.digest, "approve-confirm": "on"}
    )
    assert response.status_code == 403
    packet.refresh_from_db()
    assert packet.approval_status == "not_requested"


def test_approving_a_digest_no_longer_shown_is_refused_as_drifted(packet: Packet, ops: Ops) -> None:
    shown = packet.digest
    # Someone edits the packet after the approver loaded the page.
    edited = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"summary": packet.summary + " Checked."}
    )
    assert edited.digest != shown
    response = approve_via_page(client_for(ops.approver), packet, digest=shown)
    assert any("packet_drifted" in m for m in messages_of(response))
    packet.refresh_from_db()
    assert packet.approval_status == "not_requested"


def test_an_unticked_confirmation_approves_nothing(packet: Packet, ops: Ops) -> None:
    response = client_for(ops.approver).post(
        act_url(packet, "approve"), {"approve-digest": packet.digest}, follow=True
    )
    assert any("confirmation_required" in m for m in messages_of(response))
    packet.refresh_from_db()
    assert packet.approval_status == "not_requested"


# --- Edit and Prepare again -------------------------------------------------------------------


def test_an_edit_after_approval_shows_the_drift_and_the_validation_errors(
    packet: Packet, ops: Ops
) -> None:
    approve_via_page(client_for(ops.approver), packet)
    preparer = client_for(ops.preparer)
    assert 'id="act-edit"' in page(preparer, packet)
    response = preparer.post(
        act_url(packet, "edit"),
        {
            "edit-digest": packet.digest,
            "edit-posture": "contest",
            "edit-summary": packet.summary,
            "edit-citations": "\n".join([*packet.citations, "doc:never-admitted"]),
            "edit-open_questions": "",
        },
        follow=True,
    )
    assert any("Edited citations" in m for m in messages_of(response))
    edited = Packet.objects.get(pk=packet.pk)
    assert edited.citations == [*packet.citations, "doc:never-admitted"]
    assert edited.digest != packet.digest
    html = response.content.decode()  # type: ignore[attr-defined]
    validation = section(html, "packet-validation")
    assert "citation_not_admitted" in validation
    assert "doc:never-admitted" in validation
    assert 'id="drifted"' in html
    assert "DRIFTED" in section(html, "packet-approval")
    assert packet.digest in section(html, "packet-approval")  # the approved digest, still shown
    assert "not admitted" in section(html, "packet-citations")


def test_an_edit_of_content_no_longer_shown_is_refused_as_drifted(packet: Packet, ops: Ops) -> None:
    shown = packet.digest
    services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"summary": packet.summary + " Checked."}
    )
    response = client_for(ops.preparer).post(
        act_url(packet, "edit"),
        {
            "edit-digest": shown,
            "edit-posture": "contest",
            "edit-summary": "Something else.",
            "edit-citations": "\n".join(packet.citations),
            "edit-open_questions": "",
        },
        follow=True,
    )
    assert any("packet_drifted" in m for m in messages_of(response))
    assert Packet.objects.get(pk=packet.pk).summary == packet.summary + " Checked."


def test_prepare_again_makes_a_new_version_and_opens_it(packet: Packet, ops: Ops) -> None:
    response = client_for(ops.preparer).post(act_url(packet, "prepare"), follow=True)
    newest = packet.dispute.packets.order_by("-version").first()
    assert newest is not None
    assert newest.version == packet.version + 1
    assert response.redirect_chain == [(review_url(newest), 302)]  # type: ignore[attr-defined]
    assert any(f"Version {newest.version} is prepared" in m for m in messages_of(response))
    assert ops.preparer in newest.contributors.all()
    old = page(client_for(ops.approver), packet)
    assert 'id="packet-superseded"' in old
    assert 'id="act-approve"' not in old


def test_prepare_again_needs_the_change_permission_the_api_asks(packet: Packet, ops: Ops) -> None:
    """Issue 38 item 1: asking for a version changes the packet, so the admin asks
    disputes.change_packet as the API's POST …/packet does; an approver without it is shown no
    button and refused the POST, and no version is made."""
    approver = client_for(ops.approver)
    versions = packet.dispute.packets.count()
    assert 'id="act-prepare"' not in page(approver, packet)
    assert 'id="act-prepare"' in page(client_for(ops.preparer), packet)
    assert approver.post(act_url(packet, "prepare")).status_code == 403
    assert approver.post(act_url(packet, "appeal")).status_code == 403
    assert packet.dispute.packets.count() == versions


# --- File -------------------------------------------------------------------------------------


def test_a_filer_files_the_approved_packet_with_the_proposed_key(packet: Packet, ops: Ops) -> None:
    approve_via_page(client_for(ops.approver), packet)
    filer = client_for(ops.filer)
    html = page(filer, packet)
    proposed = services.filing_key_proposal(Packet.objects.get(pk=packet.pk))
    assert f'name="file-idempotency_key" value="{proposed}"' in html
    assert f"I file this packet with digest {packet.digest[:16]}…" in html

    response = filer.post(
        act_url(packet, "file"),
        {"file-digest": packet.digest, "file-idempotency_key": proposed, "file-confirm": "on"},
        follow=True,
    )
    assert any(f"Sent to the provider with key {proposed}" in m for m in messages_of(response))
    filed = Packet.objects.get(pk=packet.pk)
    assert (filed.filing_key, filed.filed_by) == (proposed, ops.filer)
    assert filed.filing_status == "awaiting_readback"
    assert filed.filing_run is not None
    filing = section(response.content.decode(), "packet-filing")  # type: ignore[attr-defined]
    assert "awaiting readback" in filing
    assert filed.filing_run.public_id in filing

    settle_runs()  # the independent readback decides
    filing = section(page(filer, packet), "packet-filing")
    assert "filed (readback verified)" in filing
    assert "VERIFIED" in filing
    run_url = reverse("admin:verification_verificationrun_change", args=[filed.filing_run.pk])
    assert f'href="{run_url}"' in filing
    assert filed.filing_request_digest
    assert Packet.objects.get(pk=packet.pk).filing_request_digest in filing
    for claim in ("won", "accepted", "closed"):
        assert not re.search(rf"\b{claim}\b", filing, re.IGNORECASE), claim
    # Filed once: nothing more to file, approve or prepare on this dispute.
    html = page(filer, packet)
    assert 'id="act-file"' not in html
    assert 'id="act-prepare"' not in html
    assert Dispute.objects.get(pk=packet.dispute_id).packets.count() == 2


def test_the_file_form_is_for_those_with_the_permission(packet: Packet, ops: Ops) -> None:
    approve_via_page(client_for(ops.approver), packet)
    approver = client_for(ops.approver)
    assert 'id="act-file"' not in page(approver, packet)
    response = approver.post(
        act_url(packet, "file"),
        {
            "file-digest": packet.digest,
            "file-idempotency_key": services.filing_key_proposal(packet),
            "file-confirm": "on",
        },
    )
    assert response.status_code == 403
    assert Packet.objects.get(pk=packet.pk).filing_status == "not_filed"


def test_the_packet_change_url_opens_the_review_page(packet: Packet, ops: Ops) -> None:
    response = client_for(ops.approver).get(
        reverse("admin:disputes_packet_change", args=[packet.pk])
    )
    assert response.status_code == 302
    assert response["Location"] == review_url(packet)
    listing = client_for(ops.approver).get(reverse("admin:disputes_packet_changelist"))
    assert f'href="{review_url(packet)}"' in listing.content.decode()
