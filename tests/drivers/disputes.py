"""Disputes against the sandbox, built the way they happen: an envelope funded through the API, its
verification runs driven to their verdicts (so Vouch holds signed receipts), refunds through the
API, a dispute opened through the sandbox's control API and recorded from its provider event."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from accounts.models import User
from disputes import services
from disputes.models import Dispute, DisputeSource, Packet
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs

# What a clerk who enters disputes, admits evidence and asks for packets holds: the permissions the
# admin, the API and MCP ask alike (disputes/permissions.py).
CLERK = ("view_dispute", "add_dispute", "add_evidence", "change_packet")


def staff_user(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", f"pw-{username}-123")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    for perm in perms:
        user.user_permissions.add(Permission.objects.get(codename=perm))
    return User.objects.get(pk=user.pk)  # a fresh permission cache


class Ops:
    """Three people: one prepares (admits evidence, edits), one approves, one files."""

    def __init__(self) -> None:
        # The preparer may approve in general, just not a version they contributed to.
        self.preparer = staff_user("pat", "change_packet", "approve_packet")
        self.approver = staff_user("ada", "approve_packet")
        self.filer = staff_user("fil", "file_packet")


@pytest.fixture
def ops(db: None) -> Ops:
    return Ops()


@pytest.fixture
def outcomes_viewer(db: None) -> Client:
    """Staff who may read disputes, signed in (the outcomes page and its CSV), and one dispute
    decided in October 2026 for the page to count."""
    Dispute.objects.create(
        provider_dispute_id="dp_outcomes",
        charge_id="ch_outcomes",
        amount_micro=10_000_000,
        reason="fraudulent",
        provider_status="won",
        decided_at=datetime(2026, 10, 3, tzinfo=UTC),
        source=DisputeSource.STAFF,
    )
    client = Client(raise_request_exception=False)
    client.force_login(staff_user("vera", "view_dispute"))
    return client


class World:
    """A buyer's funded envelope at the sandbox, and disputes on its charge."""

    def __init__(self, buyer: Api, sandbox: SandboxControl) -> None:
        self.buyer = buyer
        self.sandbox = sandbox
        self.envelope_id = ""
        self.charge_id = ""

    def fund(self, amount_micro: int = 10_000_000) -> str:
        data = self.buyer.create(amount_micro)
        self.envelope_id = data["envelope_id"]
        self.charge_id = data["funding_legs"][0]["charge"]
        settle_runs()
        return self.charge_id

    def refund(self, amount_micro: int, *, settle: bool = True) -> dict[str, Any]:
        response = self.buyer.post(
            f"/api/v1/escrow/envelopes/{self.envelope_id}/refund", {"amount_micro": amount_micro}
        )
        assert response.status_code in (200, 201), response.content
        if settle:
            settle_runs()
        return dict(response.json()["data"])

    def dispute(self, *, reason: str = "fraudulent", amount_cents: int | None = None) -> Dispute:
        opened = self.sandbox.open_dispute(self.charge_id, reason=reason, amount=amount_cents)
        services.dispute_on_provider_event(
            event={"type": "charge.dispute.created", "data": {"object": {"id": opened["id"]}}}
        )
        return Dispute.objects.get(provider_dispute_id=opened["id"])


@pytest.fixture
def world(alice: Api, stripe_at_sandbox: SandboxControl) -> World:
    return World(alice, stripe_at_sandbox)


def current(dispute: Dispute) -> Packet:
    packet = dispute.packets.order_by("-version").first()
    assert packet is not None
    return packet


def evidence(ref: str, kind: str, summary: str = "Signed delivery confirmation") -> dict[str, str]:
    import hashlib

    return {
        "ref": ref,
        "sha256": hashlib.sha256(ref.encode()).hexdigest(),
        "kind": kind,
        "summary": summary,
    }


def contest_ready(world: World, ops: Ops, *, reason: str = "product_not_received") -> Packet:
    """A funded charge, a dispute, and delivery/consent evidence admitted by the preparer, which
    gives the dispute a new version by itself (issue 10 item 10), the preparer contributing: a
    ready `contest` packet."""
    world.fund()
    dispute = world.dispute(reason=reason)
    kind = "delivery" if reason == "product_not_received" else "consent"
    services.evidence_admit(dispute=dispute, actor=ops.preparer, data=evidence("doc:1", kind))
    packet = current(dispute)
    assert packet.version == 2
    assert (packet.posture, packet.status) == ("contest", "ready_for_review"), packet.validation
    return packet


def approve(packet: Packet, ops: Ops, **options: Any) -> Packet:
    """The approver approves the digest shown (`fee_acknowledged=True` and the like passed on)."""
    return services.packet_approve(
        packet=packet, actor=ops.approver, confirmed_digest=packet.digest, **options
    )


def file(packet: Packet, ops: Ops) -> Packet:
    """The filer files the approved digest with the proposed key."""
    return services.packet_file(
        packet=packet,
        actor=ops.filer,
        confirmed_digest=packet.digest,
        idempotency_key=services.filing_key_proposal(packet),
    )


@pytest.fixture
def media(settings: Any, tmp_path: Any) -> Any:
    """Evidence files in a folder of this test's own (the storage API's default storage)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


def pdf(text: str = "Signed for at the door", *, size: int = 0) -> bytes:
    """A small PDF-looking document (what admission checks: the extension and `%PDF-`), padded to
    `size` bytes when asked."""
    body = f"%PDF-1.4\n% {text}\n".encode()
    if size > len(body):
        body += b"0" * (size - len(body) - 6) + b"\n%%EOF"
    return body


def admit_file(
    dispute: Dispute,
    actor: User,
    ref: str,
    kind: str,
    content: bytes,
    *,
    name: str = "proof.pdf",
    summary: str = "Signed delivery confirmation",
) -> Any:
    evidence, _ = services.evidence_admit(
        dispute=dispute,
        actor=actor,
        data={"ref": ref, "kind": kind, "summary": summary},
        file=(name, content),
    )
    return evidence
