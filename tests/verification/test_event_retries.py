"""Stored provider events whose processing fails (SPEC §7, §11): retried a bounded number of
times with a growing gap (counted on the event, due at `next_attempt_at` on the shared clock),
then given up — the error recorded, one escalation with its notification, and the event pruned
like any other processed event. Time moves by time-machine, never by sleeping."""

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Group, Permission
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from core.models import AuditEvent
from stripe_sandbox.client import SandboxControl
from verification import events, selectors, tasks
from verification.models import Escalation, Notification, ProviderEvent
from verification.services import provider_event_store, provider_events_prune

pytestmark = pytest.mark.django_db

BASE_S, MAX_S, ATTEMPTS = 60, 600, 6


@pytest.fixture(autouse=True)
def _bounds(settings: Any) -> None:
    settings.VERIFICATION_EVENT_MAX_ATTEMPTS = ATTEMPTS
    settings.VERIFICATION_EVENT_RETRY_BASE_S = BASE_S
    settings.VERIFICATION_EVENT_RETRY_MAX_S = MAX_S
    settings.VERIFICATION_EVENT_RETRY_AFTER_S = 30


@pytest.fixture
def ops() -> User:
    user = User.objects.create_user("ops1", email="ops1@example.test", password="x")
    user.groups.add(Group.objects.get_or_create(name="ops")[0])
    return user


@pytest.fixture
def traveller() -> Iterator[time_machine.Traveller]:
    with time_machine.travel(timezone.now(), tick=False) as clock:
        yield clock


def _legacy(event_id: str, type_: str, data: Any) -> ProviderEvent:
    """A row stored before intake checked `data` (the webhook refuses such a payload now)."""
    return ProviderEvent.objects.create(
        event_id=event_id,
        type=type_,
        provider_created=1,
        payload={"id": event_id, "type": type_, "created": 1, "data": data},
        raw="{}",
    )


def _retry_job() -> list[int]:
    """What `verification.retry_events` does, with each task run here as a worker would."""
    due = selectors.events_unprocessed(older_than_s=30)
    for pk in due:
        tasks.process_event.apply(args=[pk])
    return due


def _delay(attempt: int) -> timedelta:
    return timedelta(seconds=min(BASE_S * 2 ** (attempt - 1), MAX_S))


def _run_until_given_up(event: ProviderEvent, traveller: time_machine.Traveller) -> list[datetime]:
    """Run the first task and then the retry job at every moment until nothing is due any more;
    returns when each attempt was made."""
    made: list[datetime] = []
    result = tasks.process_event.apply(args=[event.pk])
    assert result.successful()  # the task records the failure; it does not raise a traceback
    made.append(timezone.now())
    for _ in range(40):
        event.refresh_from_db()
        if event.processed_at is not None:
            break
        assert event.next_attempt_at is not None
        # Just before it is due the job leaves it alone; at the due time it retries it.
        traveller.move_to(event.next_attempt_at - timedelta(seconds=1))
        assert _retry_job() == []
        traveller.move_to(event.next_attempt_at)
        assert _retry_job() == [event.pk]
        made.append(timezone.now())
    return made


def _assert_given_up(event: ProviderEvent, made: list[datetime], error: str) -> None:
    event.refresh_from_db()
    assert event.attempts == ATTEMPTS == len(made)
    assert [later - earlier for earlier, later in itertools.pairwise(made)] == [
        _delay(k) for k in range(1, ATTEMPTS)
    ]
    assert event.processed_at == made[-1]
    assert event.next_attempt_at is None
    assert error in event.processing_error
    escalation = Escalation.objects.get()
    assert escalation.status == "open"
    assert (escalation.subject_type, escalation.subject_id) == ("provider_event", event.event_id)
    assert escalation.money is False
    assert event.type in escalation.reason
    assert str(ATTEMPTS) in escalation.reason
    notification = Notification.objects.get(escalation=escalation)
    assert notification.recipients == ["ops1@example.test"]
    assert (
        AuditEvent.objects.filter(action="escalation.open", target_id=event.event_id).count() == 1
    )


def test_an_event_whose_data_is_not_an_object_is_retried_with_backoff_then_given_up(
    ops: User, traveller: time_machine.Traveller, django_capture_on_commit_callbacks: Any
) -> None:
    event = _legacy("evt_bad_data", "refund.failed", "not an object")
    with django_capture_on_commit_callbacks(execute=True):
        made = _run_until_given_up(event, traveller)
    _assert_given_up(event, made, "AttributeError")
    assert [message.to for message in mail.outbox] == [["ops1@example.test"]]

    # No more attempts, however long it waits, and the job does not pick it up again.
    traveller.shift(timedelta(days=2))
    assert _retry_job() == []
    tasks.process_event.apply(args=[event.pk])  # a late duplicate task changes nothing
    event.refresh_from_db()
    assert event.attempts == ATTEMPTS
    assert Escalation.objects.count() == 1

    # A person sees it in the admin: the escalation, and the event with its error.
    staff = User.objects.create_user("viewer", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="verification",
            codename__in=["view_escalation", "view_providerevent"],
        )
    )
    client = Client()
    client.force_login(staff)
    escalation = Escalation.objects.get()
    page = client.get(reverse("admin:verification_escalation_change", args=[escalation.pk]))
    assert page.status_code == 200
    assert "evt_bad_data" in page.content.decode()
    page = client.get(reverse("admin:verification_providerevent_change", args=[event.pk]))
    assert page.status_code == 200
    assert "AttributeError" in page.content.decode()
    shown = {field.field["name"] for fieldset in page.context["adminform"] for line in fieldset
             for field in line}  # fmt: skip
    assert {"attempts", "next_attempt_at"} <= shown  # how often it was tried, and whether again

    # Pruned with the other processed events once old enough, not before.
    settings_days = 30
    assert provider_events_prune(older_than_days=settings_days) == 0
    traveller.shift(timedelta(days=settings_days))
    assert provider_events_prune(older_than_days=settings_days) == 1
    assert not ProviderEvent.objects.exists()
    assert Escalation.objects.count() == 1  # the person still has it


@pytest.mark.django_db(transaction=True)
def test_a_dispute_event_the_provider_answers_404_for_is_bounded_and_escalated_once(
    ops: User,
    sandbox: SandboxControl,
    settings: Any,
    traveller: time_machine.Traveller,
) -> None:
    settings.STRIPE_API_BASE = sandbox.url
    stored, _ = provider_event_store(
        event={
            "id": "evt_dispute_gone",
            "type": "charge.dispute.created",
            "created": int(timezone.now().timestamp()),
            "data": {"object": {"id": "dp_missing", "object": "dispute", "charge": "ch_x"}},
        },
        raw="{}",
    )
    made = _run_until_given_up(stored, traveller)
    _assert_given_up(stored, made, "dp_missing")
    # One provider read per attempt, and none after the last.
    assert sandbox.state()["requests"].get("GET /v1/disputes/{id}") == ATTEMPTS
    traveller.shift(timedelta(days=1))
    assert _retry_job() == []
    assert sandbox.state()["requests"].get("GET /v1/disputes/{id}") == ATTEMPTS
    assert [message.to for message in mail.outbox] == [["ops1@example.test"]]


def test_a_failure_that_clears_is_processed_and_nothing_is_escalated(
    monkeypatch: pytest.MonkeyPatch, traveller: time_machine.Traveller
) -> None:
    calls: list[str] = []

    def flaky(*, event: dict[str, Any]) -> None:
        calls.append(event["id"])
        if len(calls) < 3:
            raise RuntimeError("the provider could not be read")

    monkeypatch.setitem(events._HANDLERS, "vouch.test.flaky", [flaky])
    stored, _ = provider_event_store(
        event={"id": "evt_flaky", "type": "vouch.test.flaky", "created": 1, "data": {"object": {}}},
        raw="{}",
    )
    tasks.process_event.apply(args=[stored.pk])
    stored.refresh_from_db()
    assert (stored.attempts, stored.processed_at) == (1, None)
    assert stored.processing_error == "RuntimeError: the provider could not be read"
    assert stored.next_attempt_at == timezone.now() + _delay(1)
    for attempt in (2, 3):
        traveller.move_to(stored.next_attempt_at)
        assert _retry_job() == [stored.pk]
        stored.refresh_from_db()
        assert stored.attempts == attempt
    assert stored.processed_at == timezone.now()
    assert stored.processing_error == ""
    assert stored.next_attempt_at is None
    assert calls == ["evt_flaky"] * 3
    assert not Escalation.objects.exists()


def test_a_task_delivered_twice_makes_one_attempt(
    monkeypatch: pytest.MonkeyPatch, traveller: time_machine.Traveller
) -> None:
    calls: list[str] = []

    def failing(*, event: dict[str, Any]) -> None:
        calls.append(event["id"])
        raise RuntimeError("no")

    monkeypatch.setitem(events._HANDLERS, "vouch.test.failing", [failing])
    stored, _ = provider_event_store(
        event={"id": "evt_f", "type": "vouch.test.failing", "created": 1, "data": {"object": {}}},
        raw="{}",
    )
    tasks.process_event.apply(args=[stored.pk])
    tasks.process_event.apply(args=[stored.pk])  # at-least-once delivery: not due yet
    traveller.shift(timedelta(seconds=45))  # past the job's grace, before the backoff
    assert _retry_job() == []
    stored.refresh_from_db()
    assert stored.attempts == 1
    assert calls == ["evt_f"]


def test_the_retry_job_still_takes_up_an_event_whose_first_task_was_lost(
    traveller: time_machine.Traveller,
) -> None:
    stored, _ = provider_event_store(
        event={"id": "evt_lost", "type": "refund.created", "created": 1, "data": {"object": {}}},
        raw="{}",
    )
    assert _retry_job() == []  # its task may still be queued
    traveller.shift(timedelta(seconds=31))
    assert _retry_job() == [stored.pk]
    stored.refresh_from_db()
    assert stored.processed_at is not None
    assert stored.attempts == 1


def test_the_bounds_are_settings_with_defaults(settings: Any) -> None:
    from config.settings import base

    assert base.VERIFICATION_EVENT_MAX_ATTEMPTS >= 3
    assert 0 < base.VERIFICATION_EVENT_RETRY_BASE_S <= base.VERIFICATION_EVENT_RETRY_MAX_S
