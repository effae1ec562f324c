"""Evidence files (issue 13): admitted with a SHA-256 Vouch computes, kept through the storage API,
mapped to Stripe's evidence fields and uploaded through the Files API when the packet is filed —
the sandbox, read through the real SDK, shows the uploaded file on the dispute's evidence — with
the digest binding each file's SHA-256 (not the provider's id, which exists only at filing)."""

from __future__ import annotations

import copy
import hashlib
import urllib.request
from typing import Any

import pytest
import stripe
from django.core.files.storage import default_storage

from disputes import services
from disputes.exceptions import (
    EvidenceCredential,
    EvidenceFileMissing,
    EvidenceFileTooLarge,
    EvidenceFileType,
    EvidenceRefConflict,
    EvidenceSha256Mismatch,
)
from disputes.models import Evidence, Packet
from disputes.packets import evidence_mapping, filing_request, packet_digest
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, admit_file, current, pdf
from tests.helpers import settle_runs

from .test_filing import approve, file, read_dispute, submissions

pytestmark = pytest.mark.usefixtures("media")


def sandbox_client(sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url, "files": sandbox.url}
    )


def file_bytes_at(sandbox: SandboxControl, file_id: str) -> bytes:
    """The bytes the sandbox holds for a file, from the URL its File object gives."""
    url = sandbox_client(sandbox).v1.files.retrieve(file_id).url
    assert url is not None
    request = urllib.request.Request(url, headers={"Authorization": "Bearer sk_test_x"})  # noqa: S310
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the sandbox's own URL
        return bytes(response.read())


def delivery_packet(world: World, ops: Ops, content: bytes, **kwargs: Any) -> Packet:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    admit_file(dispute, ops.preparer, "pod:1", "delivery", content, **kwargs)
    packet = current(dispute)
    assert (packet.posture, packet.status) == ("contest", "ready_for_review"), packet.validation
    return packet


# --- admission --------------------------------------------------------------------------------


def test_a_file_is_admitted_with_the_sha256_vouch_computes_and_kept_in_storage(
    world: World, ops: Ops
) -> None:
    content = pdf("Parcel signed for by J. Doe")
    packet = delivery_packet(world, ops, content, name="signed-pod.pdf")
    evidence = Evidence.objects.get(dispute=packet.dispute, ref="pod:1")
    assert evidence.sha256 == hashlib.sha256(content).hexdigest()
    assert (evidence.file_name, evidence.file_size, evidence.file_type) == (
        "signed-pod.pdf",
        len(content),
        "pdf",
    )
    with default_storage.open(evidence.file.name, "rb") as handle:
        assert handle.read() == content
    assert evidence.file.name == f"disputes/evidence/{evidence.sha256}.pdf"
    # The version it gives the dispute holds it, and its admitter contributes to that version.
    held = packet.evidence_refs[0]
    assert held["sha256"] == evidence.sha256
    assert held["file"] == {"name": "signed-pod.pdf", "size": len(content), "type": "pdf"}
    assert ops.preparer in packet.contributors.all()


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("run.exe", b"MZ\x90\x00", EvidenceFileType),
        ("fake.pdf", b"MZ not a pdf", EvidenceFileType),  # the bytes must be what the name says
        ("photo.png", b"%PDF-1.4 a pdf named png", EvidenceFileType),
        ("notes.pdf", b"%PDF-1.4\nthe key is sk_live_abcdef1234567890\n", EvidenceCredential),
        ("sk_live_abcdef1234567890.pdf", b"%PDF-1.4\n", EvidenceCredential),
    ],
)
def test_a_file_that_breaks_a_rule_is_refused_and_nothing_is_stored(
    world: World, ops: Ops, name: str, content: bytes, error: type[Exception]
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    with pytest.raises(error):
        admit_file(dispute, ops.preparer, "pod:1", "delivery", content, name=name)
    assert not Evidence.objects.filter(dispute=dispute).exists()
    assert current(dispute).version == 1


def test_a_file_over_the_files_limit_and_a_wrong_sha256_are_refused(
    world: World, ops: Ops, settings: Any
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES = 1000
    with pytest.raises(EvidenceFileTooLarge):
        admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf(size=1001))
    with pytest.raises(EvidenceSha256Mismatch):
        services.evidence_admit(
            dispute=dispute,
            actor=ops.preparer,
            data={"ref": "pod:1", "kind": "delivery", "summary": "POD", "sha256": "0" * 64},
            file=("pod.pdf", pdf()),
        )
    assert not Evidence.objects.filter(dispute=dispute).exists()
    admitted = admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf(size=1000))
    assert admitted.file_size == 1000
    # The same ref with another file is another content: refused, the first one stands.
    with pytest.raises(EvidenceRefConflict):
        admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("another", size=900))
    assert Evidence.objects.get(dispute=dispute).sha256 == admitted.sha256


# --- the mapping and the digest ----------------------------------------------------------------


def test_the_request_names_each_file_by_its_sha256_and_the_digest_changes_with_the_file(
    world: World, ops: Ops
) -> None:
    content = pdf("Parcel signed for")
    packet = delivery_packet(world, ops, content)
    request = filing_request(packet, digest=packet.digest)
    assert request is not None
    placeholder = request["evidence"]["shipping_documentation"]["file"]
    assert placeholder["sha256"] == hashlib.sha256(content).hexdigest()
    assert placeholder["ref"] == "pod:1"
    assert "file_" not in str(request)  # no provider id before filing
    assert packet.digest == packet_digest(packet)

    # The same packet with other bytes in the file (another SHA-256, same size): another digest
    # and another request; the digest binds the file, not its name.
    other = hashlib.sha256(pdf("Parcel left at the door")).hexdigest()
    changed = copy.copy(packet)
    changed.evidence_refs = [{**packet.evidence_refs[0], "sha256": other}]
    changed.citations = list(packet.citations)
    assert packet_digest(changed) != packet.digest
    mapped = evidence_mapping(changed)
    assert mapped is not None
    assert mapped["shipping_documentation"]["file"]["sha256"] == other


def test_kinds_map_to_stripe_fields(world: World, ops: Ops) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    actor = ops.preparer
    admit_file(dispute, actor, "pod:1", "delivery", pdf("pod"), summary="Signed for")
    admit_file(dispute, actor, "sig:1", "consent", pdf("sig"), summary="Signed order form")
    admit_file(dispute, actor, "sig:2", "consent", pdf("sig2"), summary="Second signature")
    for ref, kind, summary in (
        ("ups:1", "delivery", "Tracking: 1Z999AA10123456784"),
        ("policy:1", "policy", "Refund policy shown at checkout, box ticked"),
        ("mail:1", "communication", "Customer thanked us for the parcel"),
    ):
        services.evidence_admit(
            dispute=dispute,
            actor=actor,
            data={
                "ref": ref,
                "kind": kind,
                "summary": summary,
                "sha256": hashlib.sha256(ref.encode()).hexdigest(),
            },
        )
    packet = services.packet_edit(
        packet=current(dispute),
        actor=actor,
        changes={"citations": ["pod:1", "sig:1", "sig:2", "ups:1", "policy:1", "mail:1"]},
    )
    mapped = evidence_mapping(packet)
    assert mapped is not None
    files = {
        name: value["file"]["ref"] for name, value in mapped.items() if isinstance(value, dict)
    }
    assert files == {
        "shipping_documentation": "pod:1",
        "customer_signature": "sig:1",
        "customer_communication": "sig:2",  # the second consent file takes the next field
    }
    assert mapped["shipping_tracking_number"] == "1Z999AA10123456784"
    assert mapped["refund_policy_disclosure"] == "Refund policy shown at checkout, box ticked"
    text = mapped["uncategorized_text"]
    assert text.startswith("Posture: contest")
    assert packet.summary in text
    assert "mail:1 (communication" in text  # prose evidence stays in the response text
    assert "sent as shipping_documentation" in text


# --- filing (issue 13 acceptance 3) ------------------------------------------------------------


def test_filing_a_delivery_file_sends_shipping_documentation_with_the_uploaded_file_id(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    content = pdf("Parcel signed for by J. Doe at 12 Main St", size=3000)
    packet = approve(delivery_packet(world, ops, content, name="signed-pod.pdf"), ops)
    assert stripe_at_sandbox.state()["counts"]["files"] == 0  # nothing uploaded before filing
    sent = file(packet, ops)
    assert (sent.filing_status, sent.provider_status) == ("awaiting_readback", "answered")
    sha256 = hashlib.sha256(content).hexdigest()
    file_id = sent.filing_files[sha256]
    assert file_id.startswith("file_")

    # The sandbox, read through the SDK, shows the file on the dispute's evidence.
    at_provider = read_dispute(stripe_at_sandbox, packet.dispute.provider_dispute_id)
    assert at_provider["evidence"]["shipping_documentation"] == file_id
    assert at_provider["metadata"]["vouch_packet_digest"] == packet.digest == packet.approved_digest
    assert packet.summary in at_provider["evidence"]["uncategorized_text"]
    uploaded = sandbox_client(stripe_at_sandbox).v1.files.retrieve(file_id)
    assert (uploaded.purpose, uploaded.filename, uploaded.size) == (
        "dispute_evidence",
        "signed-pod.pdf",
        len(content),
    )
    assert file_bytes_at(stripe_at_sandbox, file_id) == content
    shown = sandbox_client(stripe_at_sandbox).v1.disputes.retrieve(
        packet.dispute.provider_dispute_id, params={"expand": ["evidence.shipping_documentation"]}
    )
    assert (
        shown.evidence.shipping_documentation.id,
        shown.evidence.shipping_documentation.size,
    ) == (
        file_id,
        len(content),
    )
    assert stripe_at_sandbox.state()["counts"]["files"] == 1

    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"  # the approved digest held


def test_a_file_upload_without_an_answer_is_resumed_with_the_same_key(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """`apply_then_drop` on the upload: the file is made, its answer lost; the adapter's retry
    with the same key is replayed (one file at the provider), and the filing goes on."""
    content = pdf("pod", size=2000)
    packet = approve(delivery_packet(world, ops, content), ops)
    stripe_at_sandbox.add_fault("/v1/files", "apply_then_drop", method="POST", times=1)
    sent = file(packet, ops)
    hits = [f for f in stripe_at_sandbox.faults() if f["kind"] == "apply_then_drop"]
    assert hits[0]["hits"] == 1
    assert stripe_at_sandbox.state()["counts"]["files"] == 1
    assert sent.filing_status == "awaiting_readback"
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"


def test_an_upload_that_keeps_failing_leaves_the_filing_to_resume(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    content = pdf("pod", size=2000)
    packet = approve(delivery_packet(world, ops, content), ops)
    dispute_id = packet.dispute.provider_dispute_id
    stripe_at_sandbox.add_fault("/v1/files", "server_error", method="POST")
    sent = file(packet, ops)
    assert (sent.filing_status, sent.provider_status) == ("submitting", "unknown")
    assert sent.filing_error == "file_upload:server_error"
    assert submissions(stripe_at_sandbox, dispute_id) == 0  # the dispute was never updated
    assert stripe_at_sandbox.state()["counts"]["files"] == 0

    stripe_at_sandbox.clear_faults()
    assert services.filings_resume(older_than_s=0) == 1  # the scheduled job, same keys
    resumed = Packet.objects.get(pk=packet.pk)
    assert (resumed.filing_status, resumed.provider_status) == ("awaiting_readback", "answered")
    assert resumed.filing_key == sent.filing_key
    assert submissions(stripe_at_sandbox, dispute_id) == 1
    assert stripe_at_sandbox.state()["counts"]["files"] == 1
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"


def test_a_file_altered_in_storage_is_not_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = approve(delivery_packet(world, ops, pdf("pod")), ops)
    evidence = Evidence.objects.get(dispute=packet.dispute, ref="pod:1")
    path = default_storage.path(evidence.file.name)
    with open(path, "wb") as handle:
        handle.write(pdf("something else"))
    with pytest.raises(EvidenceFileMissing):
        file(packet, ops)
    assert Packet.objects.get(pk=packet.pk).filing_status == "not_filed"
    assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 0
    assert stripe_at_sandbox.state()["counts"]["files"] == 0


def test_a_filing_interrupted_after_its_uploads_resumes_with_the_same_keys(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """As if the process died after uploading the file and before updating the dispute: the
    scheduled job repeats the upload with the same key (a replay: one file at the provider) and
    sends the dispute update once."""
    from disputes.services import file_upload_key
    from disputes.services.filing import _reserve_filing
    from providers import provider_from_settings

    content = pdf("pod", size=1500)
    packet = approve(delivery_packet(world, ops, content), ops)
    key = services.filing_key_proposal(packet)
    reserved = _reserve_filing(
        packet=packet, actor=ops.filer, confirmed_digest=packet.digest, key=key
    )
    sha256 = hashlib.sha256(content).hexdigest()
    first = provider_from_settings().file_upload(
        filename="proof.pdf", content=content, idempotency_key=file_upload_key(reserved, sha256)
    )
    assert first.accepted
    assert Packet.objects.get(pk=packet.pk).filing_status == "submitting"

    assert services.filings_resume(older_than_s=0) == 1
    resumed = Packet.objects.get(pk=packet.pk)
    assert (resumed.filing_status, resumed.provider_status) == ("awaiting_readback", "answered")
    assert resumed.filing_files == {sha256: first.require()["id"]}
    assert stripe_at_sandbox.state()["counts"]["files"] == 1
    assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 1
    shown = read_dispute(stripe_at_sandbox, packet.dispute.provider_dispute_id)
    assert shown["evidence"]["shipping_documentation"] == first.require()["id"]
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
