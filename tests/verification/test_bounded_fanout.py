"""Under load the queue holds no backlog (SPEC §11, issue 28): a burst of webhook deliveries is one
drain of the stored events, not one task each; attempts are sent only while the workers have room
(VERIFICATION_IN_FLIGHT_MAX), whether the poll or an event wakes the run. Against the real broker
and a real worker."""

import json
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import redis
import time_machine
from celery.contrib.testing.worker import start_worker
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from config.celery_app import app
from core.models import PeriodicSlot, SlotState
from stripe_sandbox.webhooks import sign
from verification.models import ProviderEvent, VerificationRun
from verification.selectors import runs_in_flight
from verification.services import provider_event_process, runs_claim_within
from verification.tasks import EVENTS_SLOT

from .conftest import Refunds

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings


def _purge() -> None:
    with app.connection_for_write() as connection:
        for queue in app.conf.task_queues:
            connection.default_channel.queue_purge(queue.name)


def _queued() -> Counter[str]:
    client = redis.Redis.from_url(app.conf.broker_url)
    return Counter(
        json.loads(raw)["headers"]["task"]
        for queue in app.conf.task_queues
        for raw in client.lrange(queue.name, 0, -1)
    )


def _event(number: int) -> bytes:
    return json.dumps(
        {
            "id": f"evt_burst_{number}",
            "object": "event",
            "type": "charge.updated",
            "created": int(time.time()),
            "data": {"object": {"id": f"ch_burst_{number}", "object": "charge"}},
        }
    ).encode()


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_deliveries_is_one_drain_in_the_queue(celery_broker: str) -> None:
    _purge()
    for number in range(30):  # no worker takes anything meanwhile
        body = _event(number)
        response = Client().post(
            "/webhooks/stripe",
            body,
            content_type="application/json",
            HTTP_STRIPE_SIGNATURE=sign(body, SECRET, int(time.time())),
        )
        assert response.status_code == 200
    assert _queued() == Counter({"verification.process_events": 1})
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 20
        while ProviderEvent.objects.filter(processed_at=None).exists():
            assert time.monotonic() < deadline, "the drain did not process the 30 events in 20 s"
            time.sleep(0.1)
    assert ProviderEvent.objects.filter(event_id__startswith="evt_burst_").count() == 30
    assert PeriodicSlot.objects.get(name=EVENTS_SLOT).state == SlotState.FREE
    _purge()


@pytest.mark.django_db
def test_the_poll_claims_only_what_the_workers_have_room_for(
    refunds: Refunds, settings: Any
) -> None:
    settings.VERIFICATION_IN_FLIGHT_MAX = 3
    runs = [refunds.make(refunds.charge()) for _ in range(5)]
    VerificationRun.objects.filter(pk__in=[r.pk for r in runs]).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    first = runs_claim_within(in_flight_max=3, limit=100)
    assert len(first) == 3
    assert runs_claim_within(in_flight_max=3, limit=100) == []  # three in flight: no room
    VerificationRun.objects.filter(pk=first[0][0]).update(leased_until=None, lease_token="")
    assert len(runs_claim_within(in_flight_max=3, limit=100)) == 1  # one ended: one more
    assert runs_claim_within(in_flight_max=10, limit=0) == []


@pytest.mark.django_db
def test_an_event_with_no_room_makes_its_run_due_instead_of_sending_an_attempt(
    refunds: Refunds, settings: Any
) -> None:
    run = refunds.make(refunds.charge())
    far = timezone.now() + timedelta(hours=1)
    VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=far)
    sent: list[tuple[int, str, str]] = []
    settings.VERIFICATION_IN_FLIGHT_MAX = 0
    assert refunds.store_events("refund.created") == 1
    event = ProviderEvent.objects.get(type="refund.created")
    assert provider_event_process(event_pk=event.pk, enqueue=lambda *a: sent.append(a)) == [run.pk]
    assert sent == []
    run.refresh_from_db()
    assert run.next_attempt_at is not None
    assert run.next_attempt_at <= timezone.now()
    assert run.leased_until is None
    settings.VERIFICATION_IN_FLIGHT_MAX = 8  # with room, the same event sends an attempt at once
    VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=far)
    ProviderEvent.objects.filter(pk=event.pk).update(processed_at=None)
    provider_event_process(event_pk=event.pk, enqueue=lambda *a: sent.append(a))
    assert [(run_id, trigger) for run_id, _, trigger in sent] == [(run.pk, "event")]


@pytest.mark.django_db
def test_attempts_lost_with_a_killed_worker_give_their_room_back_within_the_window(
    refunds: Refunds, settings: Any
) -> None:
    """A worker killed with attempts reserved: their runs stay leased for VERIFICATION_LEASE_S
    (300 s), but they count as in flight for VERIFICATION_IN_FLIGHT_WINDOW_S only, so the poll
    sends the other due runs' attempts again after that, not after five minutes without a
    verdict."""
    settings.VERIFICATION_LEASE_S = 300.0
    settings.VERIFICATION_IN_FLIGHT_WINDOW_S = 20.0
    runs = [refunds.make(refunds.charge()) for _ in range(4)]
    VerificationRun.objects.filter(pk__in=[r.pk for r in runs]).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    lost = runs_claim_within(in_flight_max=2, limit=100)  # sent; the worker dies holding them
    assert len(lost) == 2
    with time_machine.travel(timezone.now() + timedelta(seconds=10), tick=False):
        assert runs_claim_within(in_flight_max=2, limit=100) == []  # inside the window: in flight
    with time_machine.travel(timezone.now() + timedelta(seconds=21), tick=False):
        again = runs_claim_within(in_flight_max=2, limit=100)
    assert {run_id for run_id, _ in again} == {r.pk for r in runs} - {run_id for run_id, _ in lost}
    for run_id, _ in lost:  # still leased: the lost attempts' runs are not claimed twice
        assert VerificationRun.objects.get(pk=run_id).leased_until > timezone.now()


@pytest.mark.django_db
def test_an_event_for_a_decided_run_leaves_the_room_to_a_due_verdict(
    refunds: Refunds, settings: Any
) -> None:
    """Under load, monitoring yields to verdicts: an event for a decided run sends its monitoring
    attempt at once only while no pending run is due; otherwise the monitoring is made due and the
    poll sends it into the room the due runs leave. (The 10,000-operation soak's verdict p95 was
    84 s: each webhook for a decided run took a place a buyer's verdict waited for.)"""
    settings.VERIFICATION_IN_FLIGHT_MAX = 1
    decided = refunds.make(refunds.charge())
    VerificationRun.objects.filter(pk=decided.pk).update(
        verdict="VERIFIED", decided_at=timezone.now(), next_attempt_at=None
    )
    waiting = refunds.make(refunds.charge())
    VerificationRun.objects.filter(pk=waiting.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    assert refunds.store_events("refund.created") == 2
    event = ProviderEvent.objects.get(payload__data__object__id=decided.action_result["id"])
    sent: list[tuple[int, str, str]] = []
    provider_event_process(event_pk=event.pk, enqueue=lambda *a: sent.append(a))
    assert sent == []  # the one place is the due verdict's
    decided.refresh_from_db()
    assert decided.monitor_at is not None  # the monitoring is due, for the poll
    assert [run_id for run_id, _ in runs_claim_within(in_flight_max=1, limit=100)] == [waiting.pk]


@pytest.mark.django_db
def test_with_a_window_as_long_as_the_lease_a_run_counts_until_its_lease_ends(
    refunds: Refunds, settings: Any
) -> None:
    """The soak's settings: a lease of 30 s under a window of 120 s. The window changes nothing
    then: a run sent an attempt counts in flight to the end of its lease, and not after."""
    settings.VERIFICATION_LEASE_S = 30.0
    settings.VERIFICATION_IN_FLIGHT_WINDOW_S = 120.0
    run = refunds.make(refunds.charge())
    VerificationRun.objects.filter(pk=run.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    assert len(runs_claim_within(in_flight_max=1, limit=100)) == 1
    sent = timezone.now()
    with time_machine.travel(sent + timedelta(seconds=29.5), tick=False):
        assert runs_in_flight() == 1
    with time_machine.travel(sent + timedelta(seconds=31), tick=False):
        assert runs_in_flight() == 0


@pytest.mark.django_db
def test_an_event_waking_a_charges_runs_counts_the_room_once_and_fills_it(
    refunds: Refunds, settings: Any
) -> None:
    """A refund event names its charge, and wakes every pending run on that charge. The room is
    counted once for the event and kept by hand: each claim takes a place, and the runs past it
    are made due. (The rate-limits bench: 41,548 counts of the runs in flight for 3,058 events,
    PostgreSQL's largest cost while verdicts waited.)"""
    settings.VERIFICATION_IN_FLIGHT_MAX = 2
    charge = refunds.charge(amount=100_000)
    runs = [refunds.make(charge) for _ in range(5)]
    far = timezone.now() + timedelta(hours=1)
    VerificationRun.objects.filter(pk__in=[r.pk for r in runs]).update(next_attempt_at=far)
    assert refunds.store_events("refund.created") == 5
    event = ProviderEvent.objects.filter(type="refund.created").first()
    assert event is not None
    sent: list[tuple[int, str, str]] = []
    with CaptureQueriesContext(connection) as queries:
        woken = provider_event_process(event_pk=event.pk, enqueue=lambda *a: sent.append(a))
    assert sorted(woken) == sorted(r.pk for r in runs)  # the charge wakes all five
    assert len(sent) == 2  # two places: two attempts sent at once
    assert runs_in_flight() == 2
    due = VerificationRun.objects.filter(pk__in=[r.pk for r in runs], next_attempt_at__lt=far)
    assert due.count() == 3  # the rest made due, for the poll
    counts = [q["sql"] for q in queries if "COUNT(*)" in q["sql"] and "leased_until" in q["sql"]]
    assert len(counts) == 1, counts
