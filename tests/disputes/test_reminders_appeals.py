"""Deadline reminders for an appeal (SPEC §11 and §17): once the network opens the appeal stage,
its own deadline gets its own 72 h and 24 h reminders — the first deadline's reminders spent or
not — until an appeal is filed; a filed response does not silence them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Group
from django.core import mail

from accounts.models import User
from disputes import services
from disputes.models import DeadlineReminder, Dispute, Packet
from disputes.reminders import deadline_reminders_send
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, approve, contest_ready, evidence, file
from tests.helpers import settle_runs
from verification.models import Escalation


@pytest.fixture
def ops_member(db: None) -> User:
    user = User.objects.create_user("opal", "opal@example.com", "pw-opal-123", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="ops")[0])
    return user


@pytest.fixture
def run_job(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> Callable[[datetime], list[str]]:
    def run(at: datetime) -> list[str]:
        with (
            time_machine.travel(at, tick=False),
            django_capture_on_commit_callbacks(execute=True),
        ):
            return [r.window for r in deadline_reminders_send()]

    return run


def in_appeal_stage(world: World, ops: Ops, sandbox: SandboxControl) -> Dispute:
    """A response filed and verified, the dispute lost, the network's appeal stage opened."""
    packet = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    dispute_id = packet.dispute.provider_dispute_id
    sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    sandbox.appeal_dispute(dispute_id)
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.updated", "data": {"object": {"id": dispute_id}}}
    )
    dispute = Dispute.objects.get(pk=packet.dispute_id)
    assert dispute.provider_status == "appeal_needs_response"
    assert dispute.response_deadline is not None
    return dispute


def test_an_appeal_deadline_is_reminded_at_72_and_24_hours_until_an_appeal_is_filed(
    world: World,
    ops: Ops,
    ops_member: User,
    stripe_at_sandbox: SandboxControl,
    run_job: Callable[[datetime], list[str]],
) -> None:
    dispute = in_appeal_stage(world, ops, stripe_at_sandbox)
    deadline = dispute.response_deadline
    assert deadline is not None
    # The first deadline's 24 h reminder was sent: the appeal's is another.
    DeadlineReminder.objects.create(
        dispute=dispute, window="24h", due_by=deadline - timedelta(days=7), sent_at=deadline
    )
    assert run_job(deadline - timedelta(hours=72)) == ["appeal 72h"]
    assert run_job(deadline - timedelta(hours=72)) == []
    escalation = Escalation.objects.get(verdict_class="dispute_appeal_deadline_72h")
    assert "must be appealed by" in escalation.reason
    assert "No appeal is filed" in escalation.reason
    assert dispute.provider_dispute_id in mail.outbox[-1].body

    services.evidence_admit(
        dispute=dispute, actor=ops.preparer, data=evidence("doc:chat", "communication")
    )
    appeal = approve(services.appeal_prepare(dispute=dispute, requested_by=ops.preparer), ops)
    assert file(appeal, ops).filing_status == "awaiting_readback"
    assert run_job(deadline - timedelta(hours=24)) == []  # an appeal is under way


def test_a_lost_dispute_not_in_its_appeal_stage_is_not_reminded(
    world: World,
    ops: Ops,
    ops_member: User,
    stripe_at_sandbox: SandboxControl,
    run_job: Callable[[datetime], list[str]],
) -> None:
    packet = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    dispute_id = packet.dispute.provider_dispute_id
    stripe_at_sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.closed", "data": {"object": {"id": dispute_id}}}
    )
    deadline = Dispute.objects.get(pk=packet.dispute_id).response_deadline
    assert deadline is not None
    assert run_job(deadline - timedelta(hours=24)) == []
