"""A periodic job has at most one run queued or running at a time (SPEC §11): beat's ticks come
faster than a stopped (or busy) worker takes them, and the queue still holds one run per job.
Against the real broker (Redis) and the configured beat scheduler."""

import json
import os
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import redis
import time_machine
from celery.contrib.testing.worker import start_worker
from celery.utils.imports import symbol_by_name
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from config.celery_app import MONEY_QUEUE, app
from core import ticks
from core.models import PeriodicSlot, SlotState
from core.periodic import all_schedules

pytestmark = pytest.mark.django_db(transaction=True)


def _queues() -> list[str]:
    return [queue.name for queue in app.conf.task_queues]


def _purge() -> None:
    with app.connection_for_write() as connection:
        for name in _queues():
            connection.default_channel.queue_purge(name)


def _queued() -> Counter[str]:
    """The tasks waiting in the broker, by task name (read off the messages themselves)."""
    client = redis.Redis.from_url(app.conf.broker_url)
    found: Counter[str] = Counter()
    for name in _queues():
        for raw in client.lrange(name, 0, -1):
            found[json.loads(raw)["headers"]["task"]] += 1
    return found


@pytest.fixture
def beat(celery_broker: str) -> Any:
    """The scheduler `celery beat` runs (CELERY_BEAT_SCHEDULER), over the installed schedules,
    with an empty queue and no worker."""
    call_command("setup_periodic_tasks", stdout=open(os.devnull, "w"))  # noqa: SIM115
    _purge()
    scheduler = symbol_by_name(settings.CELERY_BEAT_SCHEDULER)(app=app, lazy=False)
    yield scheduler
    _purge()


def test_ticks_faster_than_a_stopped_worker_leave_one_run_per_job_queued(beat: Any) -> None:
    entries = list(beat.schedule.values())
    names = {schedule.task for schedule in all_schedules()}
    assert names <= {entry.task for entry in entries}  # every job the apps declare is there
    for _ in range(25):  # 25 ticks of every job, and nothing takes them
        for entry in entries:
            beat.apply_entry(entry)
    queued = _queued()
    assert set(queued) == {entry.task for entry in entries}
    assert max(queued.values()) == 1, queued
    slots = {slot.name: slot for slot in PeriodicSlot.objects.all()}
    assert {name for name, slot in slots.items() if slot.state == SlotState.QUEUED} == {
        entry.name for entry in entries
    }
    assert {slot.skipped for slot in slots.values()} == {24}


@app.task(name="tests.core.ticks.remember")
def remember(label: str) -> None:
    RAN.append(label)


RAN: list[str] = []


def test_a_run_frees_its_slot_when_it_ends_and_the_next_tick_is_sent(beat: Any) -> None:
    """A real worker runs the tick's message: the slot is running while it runs, free after, and
    the next tick sends one run again."""
    entry = beat.schedule["core: prune expired sessions"]
    beat.apply_entry(entry)
    beat.apply_entry(entry)
    assert _queued()["core.tasks.sessions_prune"] == 1
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 20
        while PeriodicSlot.objects.get(name=entry.name).state != SlotState.FREE:
            assert time.monotonic() < deadline, "the worker did not run the tick in 20 s"
            time.sleep(0.1)
    assert _queued()["core.tasks.sessions_prune"] == 0
    beat.apply_entry(entry)
    assert _queued()["core.tasks.sessions_prune"] == 1


def test_a_tick_message_that_comes_after_its_slot_was_taken_again_does_not_run(
    celery_broker: str,
) -> None:
    """A message lost (or late) past the hold: the next tick takes the slot; the late one, when
    it comes, does nothing; the newer one runs."""
    _purge()
    RAN.clear()
    stale = ticks.tick_claim("tests: remember", every_s=1)
    assert stale is not None
    assert ticks.tick_claim("tests: remember", every_s=1) is None  # queued: the tick skips
    later = timezone.now() + timedelta(seconds=settings.PERIODIC_QUEUED_HOLD_S + 1)
    with time_machine.travel(later, tick=False):
        fresh = ticks.tick_claim("tests: remember", every_s=1)
    assert fresh is not None
    assert fresh.token != stale.token
    remember.apply_async(("stale",), headers=stale.headers())
    remember.apply_async(("fresh",), headers=fresh.headers())
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 20
        while "fresh" not in RAN or _queued():
            assert time.monotonic() < deadline, "the worker did not take both messages in 20 s"
            time.sleep(0.1)
    assert RAN == ["fresh"]
    assert PeriodicSlot.objects.get(name="tests: remember").state == SlotState.FREE


def test_a_run_killed_with_its_worker_holds_the_slot_for_its_lease_only() -> None:
    claim = ticks.tick_claim("tests: killed", every_s=2)
    assert claim is not None
    assert ticks.tick_started(claim)  # then the worker dies: no tick_done
    lease = ticks.run_lease_s(2)
    assert lease == settings.PERIODIC_RUN_LEASE_MIN_S
    start = timezone.now()
    with time_machine.travel(start + timedelta(seconds=lease - 1), tick=False):
        assert ticks.tick_claim("tests: killed", every_s=2) is None
    with time_machine.travel(start + timedelta(seconds=lease + 1), tick=False):
        assert ticks.tick_claim("tests: killed", every_s=2) is not None


@pytest.mark.parametrize(
    ("every_s", "lease_s"),
    [(1, 60.0), (60, 60.0), (600, 600.0), (3600, 3600.0), (86400, 3600.0)],
)
def test_a_runs_lease_is_its_interval_within_bounds(every_s: int, lease_s: float) -> None:
    assert ticks.run_lease_s(every_s) == lease_s


def test_two_beats_racing_for_one_slot_send_one_tick() -> None:
    won: list[ticks.Claim | None] = []
    barrier = threading.Barrier(4)

    def race() -> None:
        barrier.wait()
        won.append(ticks.tick_claim("tests: raced", every_s=5))
        from django.db import connection

        connection.close()

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(claim is not None for claim in won) == 1


def test_a_worker_on_both_queues_takes_money_work_first(celery_broker: str) -> None:
    """Ten tasks wait on the default queue, then three on the money queue: a worker consuming
    both (as a single-worker deployment starts it) takes every money one first, not one from each
    queue in turn (kombu's round robin)."""
    _purge()
    RAN.clear()
    for number in range(10):
        remember.apply_async((f"default {number}",))
    for number in range(3):
        remember.apply_async((f"money {number}",), queue=MONEY_QUEUE)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 20
        while len(RAN) < 13:
            assert time.monotonic() < deadline, f"the worker ran {RAN} in 20 s"
            time.sleep(0.1)
    assert RAN[:3] == ["money 0", "money 1", "money 2"], RAN
