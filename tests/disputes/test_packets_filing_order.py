"""Issue 24 (acceptance 3, the behaviour behind a survivor): a cited item without a file that was
admitted before a cited file does not keep that file, or any after it, from being sent to the
provider."""

from __future__ import annotations

import pytest

from disputes import services
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, admit_file, current, evidence, pdf
from tests.helpers import settle_runs

from .test_evidence_files import sandbox_client
from .test_filing import approve, file, read_dispute

pytestmark = pytest.mark.usefixtures("media")


def test_a_prose_item_admitted_before_the_files_leaves_every_file_sent_to_stripe(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    services.evidence_admit(
        dispute=dispute,
        actor=ops.preparer,
        data=evidence("track:1", "delivery", "Tracking: 1Z999AA10123456784"),
    )
    admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("pod", size=1200))
    admit_file(
        dispute, ops.preparer, "mail:1", "communication", pdf("mail", size=900),
        name="mail.pdf", summary="The buyer wrote that the parcel arrived",
    )  # fmt: skip
    packet = current(dispute)
    packet = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"citations": ["track:1", "pod:1", "mail:1"]}
    )
    assert packet.validation["ok"], packet.validation
    assert [e["ref"] for e in packet.evidence_refs] == ["track:1", "pod:1", "mail:1"]

    sent = file(approve(packet, ops), ops)
    assert sent.filing_status == "awaiting_readback", sent.filing_error
    shown = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)["evidence"]
    assert shown["shipping_tracking_number"] == "1Z999AA10123456784"
    files = sandbox_client(stripe_at_sandbox).v1.files
    assert files.retrieve(shown["shipping_documentation"]).filename == "proof.pdf"
    assert files.retrieve(shown["customer_communication"]).filename == "mail.pdf"
    settle_runs()
    assert type(sent).objects.get(pk=sent.pk).filing_status == "filed"
