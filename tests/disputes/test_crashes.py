"""Crash after commit, retry with the same key (issue 10 item 2, SPEC §4): each mutating disputes
endpoint runs in a fresh process that dies right after one of its commits; the client retries
with the same Idempotency-Key once the dead request's lease has lapsed; exactly one effect exists
and the retry answers what the first request would have."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from accounts.models import User
from core.models import AuditEvent, IdempotencyRecord
from disputes.models import Dispute, Evidence, Packet
from stripe_sandbox.client import SandboxControl
from tests.crashes import assert_died, past_the_lease, request_in_a_fresh_process
from tests.drivers.api import Api
from tests.drivers.disputes import CLERK, World, evidence, staff_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def clerk(world: World) -> Api:
    return Api(staff_user("clerk", *CLERK))


def at_provider(world: World) -> dict[str, Any]:
    """A dispute the provider holds on a funded charge, not yet known to Vouch."""
    world.fund()
    return dict(world.sandbox.open_dispute(world.charge_id, reason="product_not_received"))


def entry(opened: dict[str, Any], world: World) -> dict[str, Any]:
    return {
        "dispute_id": opened["id"],
        "charge_id": world.charge_id,
        "amount_micro": 10_000_000,
        "reason": "product_not_received",
    }


def crash(user: User, path: str, key: str, point: str, body: Any) -> None:
    process = request_in_a_fresh_process(
        username=user.get_username(), path=path, key=key, crash_at=point, body=body
    )
    assert_died(process, point)


@pytest.mark.parametrize(
    "point",
    ["dispute_entry_after_record", "dispute_entry_after_prepare", "idempotent_before_store"],
)
def test_entering_a_dispute_survives_a_crash_after_each_commit(
    world: World, clerk: Api, stripe_at_sandbox: SandboxControl, point: str
) -> None:
    opened = at_provider(world)
    body = entry(opened, world)
    crash(clerk.user, "/api/v1/disputes", "enter-1", point, body)
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    assert IdempotencyRecord.objects.get(key="enter-1").resource == dispute.public_id

    with past_the_lease("enter-1"):
        retried = clerk.post("/api/v1/disputes", body, key="enter-1")
    assert retried.status_code == 201, retried.content
    data = retried.json()["data"]
    assert data["dispute_id"] == dispute.public_id
    assert Dispute.objects.count() == 1
    assert AuditEvent.objects.filter(action="dispute.enter").count() == 1
    packet = Packet.objects.get()  # exactly one version, the entry's
    assert (packet.version, packet.requested_by) == (1, clerk.user)
    assert data["packet"]["packet_id"] == packet.public_id
    assert data["intended_submission_method"] == "manual"
    client = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": stripe_at_sandbox.url}
    )
    held = client.v1.disputes.retrieve(opened["id"])
    assert held["intended_submission_method"] == "manual"
    assert held["evidence_details"]["submission_count"] == 0
    again = clerk.post("/api/v1/disputes", body, key="enter-1")  # stored now: a replay
    assert again.get("Idempotent-Replayed") == "true"
    assert again.content == retried.content


def test_admitting_evidence_survives_a_crash_after_its_commit(world: World, clerk: Api) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    path = f"/api/v1/disputes/{dispute.public_id}/evidence"
    body = evidence("track:1", "delivery")
    crash(clerk.user, path, "ev-1", "idempotent_before_store", body)
    admitted = Evidence.objects.get()
    assert IdempotencyRecord.objects.get(key="ev-1").resource == admitted.public_id

    with past_the_lease("ev-1"):
        retried = clerk.post(path, body, key="ev-1")
    assert retried.status_code == 201, retried.content  # the admission it made, replayed
    data = retried.json()["data"]
    assert (data["created"], data["evidence"]["evidence_id"]) == (True, admitted.public_id)
    assert Evidence.objects.count() == 1
    assert AuditEvent.objects.filter(action="dispute.evidence_admit").count() == 1
    assert dispute.packets.count() == 2  # the event's version and the one the evidence brought


def test_preparing_a_packet_survives_a_crash_after_its_commit(world: World, clerk: Api) -> None:
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    path = f"/api/v1/disputes/{dispute.provider_dispute_id}/packet"
    crash(clerk.user, path, "prep-1", "idempotent_before_store", {})
    prepared = dispute.packets.get(version=2)
    assert IdempotencyRecord.objects.get(key="prep-1").resource == prepared.public_id

    with past_the_lease("prep-1"):
        retried = clerk.post(path, {}, key="prep-1")
    assert retried.status_code == 201, retried.content
    assert retried.json()["data"]["packet"]["packet_id"] == prepared.public_id
    assert dispute.packets.count() == 2  # the one it prepared, not a new one
