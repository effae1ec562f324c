"""Issue 24 item 9: a filing that was already under way before this call — the process died after
Stripe accepted it, or before — is sent again by the resume job or by a person pressing File with
the same key. Both follow one rule: past the key's life (the provider has forgotten it) nothing is
sent again and the outcome is unknown; any refusal of such a repeated send is unknown too. The
readback decides, and until it has decided the approval cannot send the packet again.

The first send runs in a fresh process that dies (`os._exit`) at a crash point, as a power cut
would; a day later is the shared clock moved for Vouch (time-machine) and the sandbox together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import stripe
import time_machine
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from core.crash import CRASH_EXIT_STATUS
from core.models import AuditEvent
from disputes import services, tasks
from disputes.exceptions import FilingKeyConflict, PacketFilingUnderway, PacketNotSubmitted
from disputes.models import Packet
from stripe_sandbox.client import SandboxControl
from tests.crashes import database_url
from tests.drivers.disputes import Ops, World, admit_file, contest_ready, current, pdf
from tests.helpers import settle_runs

from .test_filing import approve, read_dispute, submissions

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]

_FILE_AND_DIE = """
import json, sys
import django
django.setup()
from accounts.models import User
from disputes import services
from disputes.models import Packet
spec = json.loads(sys.argv[1])
packet = Packet.objects.select_related("dispute").get(pk=spec["packet"])
services.packet_file(
    packet=packet,
    actor=User.objects.get(username=spec["filer"]),
    confirmed_digest=packet.digest,
    idempotency_key=spec["key"],
)
"""


def file_in_a_process_that_dies(packet: Packet, filer: User, key: str, point: str) -> None:
    """A person files `packet` with `key` in a fresh process that dies at `point`."""
    spec = {"packet": packet.pk, "filer": filer.get_username(), "key": key}
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "STRIPE_API_BASE": settings.STRIPE_API_BASE,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "VOUCH_CRASH_AT": point,
    }
    process = subprocess.run(
        [sys.executable, "-c", _FILE_AND_DIE, json.dumps(spec)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == CRASH_EXIT_STATUS, (
        f"the filing did not die at {point}: exit {process.returncode}\n"
        f"{process.stdout[-2000:]}\n{process.stderr[-4000:]}"
    )


@contextmanager
def a_day_later(sandbox: SandboxControl) -> Iterator[None]:
    """25 hours on, for Vouch and the sandbox at once: past Stripe's 24 h key life."""
    sandbox.advance_clock(25 * 3600)
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        yield


def file_again(packet: Packet, ops: Ops, key: str) -> Packet:
    """A person presses File (the admin's call) on the version as it is now."""
    fresh = Packet.objects.select_related("dispute").get(pk=packet.pk)
    return services.packet_file(
        packet=fresh, actor=ops.filer, confirmed_digest=fresh.digest, idempotency_key=key
    )


def someone_submits_in_the_dashboard(sandbox: SandboxControl, dispute_id: str) -> None:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    client.v1.disputes.update(
        dispute_id,
        params={"evidence": {"uncategorized_text": "sent by hand"}, "submit": True},
    )


def test_filing_again_after_the_key_expired_is_read_back_not_recorded_as_not_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """The process died after Stripe accepted the filing; a day later a person presses File with
    the proposed key. Stripe has forgotten the key and would refuse a second submission: Vouch
    does not send again, records the outcome as unknown and lets the readback decide, which
    proves the first send. Meanwhile the approval cannot send the packet again."""
    packet = approve(contest_ready(world, ops), ops)
    dispute_id = packet.dispute.provider_dispute_id
    key = services.filing_key_proposal(packet)
    file_in_a_process_that_dies(packet, ops.filer, key, "filing_after_provider_call")
    died = Packet.objects.get(pk=packet.pk)
    assert (died.filing_status, died.filing_key) == ("submitting", key)
    assert submissions(stripe_at_sandbox, dispute_id) == 1  # Stripe took it

    with a_day_later(stripe_at_sandbox):
        filer = Client()
        filer.force_login(ops.filer)
        response = filer.post(  # the File button of the admin, with the proposed key
            reverse("admin:disputes_packet_file", args=[packet.pk]),
            {"file-digest": packet.digest, "file-idempotency_key": key, "file-confirm": "on"},
            follow=True,
        )
        shown = [str(m) for m in response.context["messages"]]
        assert any(f"Not sent again: filing key {key}" in m for m in shown), shown
        again = Packet.objects.get(pk=packet.pk)
        assert again.filing_status == "awaiting_readback", (
            again.filing_status,
            again.provider_status,
            again.filing_error,
        )
        assert (again.provider_status, again.filing_error) == ("unknown", "key_expired")
        assert again.filing_key == key  # kept: the filing is still this one
        assert again.filing_run is not None
        assert not AuditEvent.objects.filter(action="packet.file_refused").exists()
        # The approval sends nothing more while the readback decides: not with the same key ...
        file_again(packet, ops, key)
        assert submissions(stripe_at_sandbox, dispute_id) == 1
        # ... nor with another, and the dispute stays held (no new version to approve).
        with pytest.raises(FilingKeyConflict):
            file_again(packet, ops, "another-key")
        with pytest.raises(PacketFilingUnderway):
            services.packet_prepare(dispute=packet.dispute, requested_by=ops.preparer)
        settle_runs()
    filed = Packet.objects.get(pk=packet.pk)
    assert filed.filing_status == "filed"
    assert read_dispute(stripe_at_sandbox, dispute_id)["evidence_details"]["submission_count"] == 1


@pytest.mark.parametrize("resumer", ["the resume job", "a person pressing File"])
def test_a_refused_repeat_of_an_underway_filing_is_read_back_not_taken_for_nothing_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, resumer: str
) -> None:
    """Within the key's life: the process died before the dispute was updated, and meanwhile
    someone submitted other evidence by hand. The repeated send is refused (already submitted),
    which says nothing of what this filing did: unknown, the readback decides — and it finds a
    submission that is not this packet, so the dispute stays held for a person."""
    packet = approve(contest_ready(world, ops), ops)
    dispute_id = packet.dispute.provider_dispute_id
    key = services.filing_key_proposal(packet)
    file_in_a_process_that_dies(packet, ops.filer, key, "filing_after_file_uploads")
    assert Packet.objects.get(pk=packet.pk).filing_status == "submitting"
    someone_submits_in_the_dashboard(stripe_at_sandbox, dispute_id)

    if resumer == "the resume job":
        with time_machine.travel(timezone.now() + timedelta(minutes=2), tick=True):
            assert tasks.resume_filings() == 1
    else:
        file_again(packet, ops, key)
    again = Packet.objects.get(pk=packet.pk)
    assert again.filing_status == "awaiting_readback", (again.filing_status, again.filing_error)
    assert again.provider_status == "unknown"
    assert again.filing_error.startswith("refused_on_resume:")
    assert again.filing_key == key
    with pytest.raises(FilingKeyConflict):
        file_again(packet, ops, "another-key")

    with time_machine.travel(timezone.now() + timedelta(minutes=2), tick=True):
        settle_runs(max_rounds=45)
    held = Packet.objects.get(pk=packet.pk)
    assert held.filing_status == "readback_failed"  # something was submitted: a person decides
    assert submissions(stripe_at_sandbox, dispute_id) == 1


@pytest.mark.usefixtures("media")
@pytest.mark.parametrize("resumer", ["the resume job", "a person pressing File"])
def test_an_upload_refused_on_a_repeated_send_does_not_undo_a_filing_stripe_took(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, resumer: str
) -> None:
    """The process died after Stripe took the dispute update (its file uploaded first); the
    repeated send's upload is refused. Nothing of the first send is undone by that: unknown, the
    readback decides, and proves the first send."""
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("pod", size=1500))
    packet = approve(current(dispute), ops)
    key = services.filing_key_proposal(packet)
    file_in_a_process_that_dies(packet, ops.filer, key, "filing_after_provider_call")
    assert submissions(stripe_at_sandbox, dispute.provider_dispute_id) == 1
    stripe_at_sandbox.add_fault("/v1/files", "refuse", method="POST", error_code="file_invalid")

    if resumer == "the resume job":
        with time_machine.travel(timezone.now() + timedelta(minutes=2), tick=True):
            assert services.filings_resume() == 1
    else:
        file_again(packet, ops, key)
    again = Packet.objects.get(pk=packet.pk)
    assert again.filing_status == "awaiting_readback", (again.filing_status, again.filing_error)
    assert again.filing_error.startswith("refused_on_resume:file_upload:")
    stripe_at_sandbox.clear_faults()
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"


def _ready_with_a_refusal(world: World, ops: Ops, sandbox: SandboxControl, refused: str) -> Packet:
    """An approved version whose first send the provider will refuse: the dispute update, or the
    upload of the evidence file sent before it."""
    if refused == "the dispute update":
        packet = approve(contest_ready(world, ops), ops)
        sandbox.add_fault(
            f"/v1/disputes/{packet.dispute.provider_dispute_id}",
            "refuse",
            method="POST",
            error_code="invalid_request",
        )
        return packet
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("pod", size=1500))
    sandbox.add_fault("/v1/files", "refuse", method="POST", error_code="file_invalid")
    return approve(current(dispute), ops)


@pytest.mark.usefixtures("media")
@pytest.mark.parametrize(
    ("refused", "code"),
    [("the dispute update", "invalid_request"), ("a file upload", "file_upload:file_invalid")],
)
def test_a_refused_first_filing_is_read_back_and_its_approval_cannot_send_again(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, refused: str, code: str
) -> None:
    """A refusal of a filing's first send is an answer, not proof that nothing was filed: it is
    recorded (provider status refused, its code kept and shown), the readback is started and the
    filing stays held until it decides. Meanwhile the approval sends nothing more, with the same
    key (even once the provider would take it) or another, and no version is prepared. The
    readback shows nothing submitted: the version is `not_submitted` (done: a new version is
    prepared, approved and filed)."""
    packet = _ready_with_a_refusal(world, ops, stripe_at_sandbox, refused)
    dispute_id = packet.dispute.provider_dispute_id
    key = services.filing_key_proposal(packet)
    filer = Client()
    filer.force_login(ops.filer)
    response = filer.post(  # the File button of the admin, with the proposed key
        reverse("admin:disputes_packet_file", args=[packet.pk]),
        {"file-digest": packet.digest, "file-idempotency_key": key, "file-confirm": "on"},
        follow=True,
    )
    shown = [str(m) for m in response.context["messages"]]
    assert any(f"The provider refused filing key {key} ({code})" in m for m in shown), shown
    assert any("a new version" in m for m in shown), shown
    held = Packet.objects.get(pk=packet.pk)
    assert (held.filing_status, held.provider_status, held.filing_error) == (
        "awaiting_readback",
        "refused",
        code,
    )
    assert held.filing_key == key
    assert held.filing_run is not None
    assert held.filing_run.contract_id == services.FILED_CONTRACT
    assert AuditEvent.objects.filter(action="packet.file_refused", target_id=packet.public_id)

    stripe_at_sandbox.clear_faults()  # the provider would take a send now: none is made
    assert file_again(packet, ops, key).filing_status == "awaiting_readback"
    with pytest.raises(FilingKeyConflict):
        file_again(packet, ops, "another-key")
    with pytest.raises(PacketFilingUnderway):
        services.packet_prepare(dispute=packet.dispute, requested_by=ops.preparer)
    assert submissions(stripe_at_sandbox, dispute_id) == 0
    assert stripe_at_sandbox.state()["counts"]["files"] == 0

    with time_machine.travel(timezone.now() + timedelta(minutes=1), tick=True):
        settle_runs(max_rounds=45)
    done = Packet.objects.get(pk=packet.pk)
    assert done.filing_status == "not_submitted"
    with pytest.raises(PacketNotSubmitted):
        file_again(packet, ops, "another-key")
    with pytest.raises(PacketNotSubmitted):
        file_again(packet, ops, key)
    fresh = services.packet_prepare(dispute=packet.dispute, requested_by=None)
    assert fresh.version == done.version + 1
    sent = file_again(approve(fresh, ops), ops, services.filing_key_proposal(fresh))
    assert sent.provider_status == "answered"
    settle_runs()
    assert Packet.objects.get(pk=fresh.pk).filing_status == "filed"
    assert submissions(stripe_at_sandbox, dispute_id) == 1
