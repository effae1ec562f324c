"""Deadline reminders (issue 13 acceptance 4, second half; SPEC §11): 72 h and then 24 h before a
dispute's deadline, while no response is filed, ops get an e-mail and an escalation — once each,
however often and on however many workers the job runs — on the shared test clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Group
from django.core import mail
from django.db import connections

from accounts.models import User
from disputes import tasks
from disputes.models import DeadlineReminder, Dispute, Packet
from disputes.reminders import deadline_reminders_send
from tests.drivers.disputes import Ops, World, contest_ready
from tests.helpers import settle_runs
from verification.models import Escalation

from .test_filing import approve, file


@pytest.fixture
def ops_member(db: None) -> User:
    user = User.objects.create_user("opal", "opal@example.com", "pw-opal-123", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="ops")[0])
    return user


@pytest.fixture
def run_job(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> Callable[[datetime], list[str]]:
    """The job at a moment of the shared clock (the e-mails go after commit, as in production):
    the windows of the reminders it sent."""

    def run(at: datetime) -> list[str]:
        with (
            time_machine.travel(at, tick=False),
            django_capture_on_commit_callbacks(execute=True),
        ):
            return [r.window for r in deadline_reminders_send()]

    return run


def due(dispute: Dispute) -> datetime:
    assert dispute.response_deadline is not None
    return dispute.response_deadline


def test_reminders_fire_once_each_at_72_and_24_hours(
    world: World, ops_member: User, run_job: Callable[[datetime], list[str]]
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    deadline = due(dispute)
    assert run_job(deadline - timedelta(hours=73)) == []
    assert run_job(deadline - timedelta(hours=72)) == ["72h"]
    assert run_job(deadline - timedelta(hours=72)) == []  # again: nothing new
    assert run_job(deadline - timedelta(hours=30)) == []
    assert run_job(deadline - timedelta(hours=24)) == ["24h"]
    assert run_job(deadline - timedelta(hours=2)) == []
    assert run_job(deadline + timedelta(hours=1)) == []  # past the deadline: pointless

    reminders = list(DeadlineReminder.objects.filter(dispute=dispute).order_by("sent_at"))
    assert [(r.window, r.recipients) for r in reminders] == [
        ("72h", ["opal@example.com"]),
        ("24h", ["opal@example.com"]),
    ]
    escalations = Escalation.objects.filter(subject_type="dispute", subject_id=dispute.public_id)
    assert sorted(escalations.values_list("verdict_class", flat=True)) == [
        "dispute_deadline_24h",
        "dispute_deadline_72h",
    ]
    assert all(e.status == "open" for e in escalations)
    assert [m.to for m in mail.outbox] == [["opal@example.com"], ["opal@example.com"]]
    assert all(dispute.provider_dispute_id in m.body for m in mail.outbox)
    assert "(72 h left; the 72 h reminder)" in mail.outbox[0].body


def test_a_dispute_first_seen_ten_hours_before_gets_only_the_24_hour_reminder(
    world: World, ops_member: User, run_job: Callable[[datetime], list[str]], settings: Any
) -> None:
    settings.DISPUTES_REMINDER_EMAILS = ["duty@example.com"]
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    deadline = due(dispute)
    assert run_job(deadline - timedelta(hours=10)) == ["24h"]
    assert run_job(deadline - timedelta(hours=1)) == []
    assert list(DeadlineReminder.objects.values_list("window", flat=True)) == ["24h"]
    # The ops group through the escalation, and the configured addresses besides.
    assert sorted(m.to[0] for m in mail.outbox) == ["duty@example.com", "opal@example.com"]


def test_a_filed_dispute_gets_no_reminder(
    world: World, ops: Ops, ops_member: User, run_job: Callable[[datetime], list[str]]
) -> None:
    packet = approve(contest_ready(world, ops), ops)
    file(packet, ops)
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    deadline = due(packet.dispute)
    assert run_job(deadline - timedelta(hours=72)) == []
    assert run_job(deadline - timedelta(hours=24)) == []
    assert not DeadlineReminder.objects.exists()
    assert not Escalation.objects.filter(subject_type="dispute").exists()
    assert mail.outbox == []


def test_the_scheduled_task_reminds_through_the_service(
    world: World, ops_member: User, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    with (
        time_machine.travel(due(dispute) - timedelta(hours=71), tick=False),
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert tasks.remind_deadlines.apply().get() == 1
        assert tasks.remind_deadlines.apply().get() == 0
    assert len(mail.outbox) == 1


@pytest.fixture
def clean_connections() -> Iterator[None]:
    yield
    connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_one_reminder(
    world: World, ops_member: User, clean_connections: None
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    barrier = threading.Barrier(4)
    sent: list[list[str]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            sent.append([r.window for r in deadline_reminders_send()])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    with time_machine.travel(due(dispute) - timedelta(hours=72), tick=False):
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert sorted(w for run in sent for w in run) == ["72h"]
    assert DeadlineReminder.objects.count() == 1
    assert Escalation.objects.filter(subject_type="dispute").count() == 1
    assert len(mail.outbox) == 1
