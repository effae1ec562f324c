"""A periodic job's run writes its line only when it did something (SPEC §11): an idle
`verification.poll` tick is silent, a tick that claimed a run writes one line, and the poll says
at INFO, at most once a minute whichever worker runs it, how many runs are pending."""

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core.cache import cache

from ops.logs import job_run_idle
from tests.drivers.api import Api
from tests.helpers import wait_until
from verification import tasks
from verification.models import VerificationRun

from .conftest import WorkerLog


def _poll_lines(log: WorkerLog) -> list[dict[str, Any]]:
    return [
        r
        for r in log.records()
        if r.get("task") == "verification.poll" and r["event"].startswith("task_")
    ]


@pytest.mark.django_db(transaction=True)
def test_an_idle_poll_writes_no_line_and_a_busy_one_writes_one(
    alice: Api, logging_worker: WorkerLog
) -> None:
    # Idle: nothing is pending. (Earlier tests' workers may have said this minute's count.)
    assert not VerificationRun.objects.exists()
    started = datetime.now(UTC)
    cache.delete_many(
        [tasks.pending_log_key(started), tasks.pending_log_key(started + timedelta(minutes=1))]
    )
    for _ in range(3):
        tasks.poll.delay()
    # Each tick still runs (the pending count's line says so once), but none writes a job line.
    wait_until(
        lambda: any("verification runs pending" in r["event"] for r in logging_worker.records()),
        timeout=30,
        what="the worker's pending-count line",
    )
    time.sleep(1.0)  # the other two ticks run meanwhile (one worker, in order)
    assert _poll_lines(logging_worker) == []
    pending_lines = [r for r in logging_worker.records() if "runs pending" in r["event"]]
    # Three ticks within a minute: one line (two if the clock's minute turned meanwhile).
    minutes = {tasks.pending_log_key(started), tasks.pending_log_key(datetime.now(UTC))}
    assert len(pending_lines) == len(minutes)
    assert pending_lines[0]["level"] == "info"
    assert pending_lines[0]["pending"] == 0

    # Busy: a funding charge's verification run falls due, and a tick claims it.
    alice.create(2_000_000)
    run = VerificationRun.objects.get()
    wait_until(lambda: run.next_attempt_at <= datetime.now(UTC), timeout=10, what="run due")
    tasks.poll.delay()
    wait_until(lambda: _poll_lines(logging_worker), timeout=30, what="the busy tick's line")
    time.sleep(1.0)
    (line,) = _poll_lines(logging_worker)
    assert line["event"] == "task_succeeded"
    assert line["level"] == "info"
    # The attempt it enqueued ran, as a job run of its own.
    wait_until(
        lambda: any(r.get("task") == "verification.attempt" for r in logging_worker.records()),
        timeout=30,
        what="the attempt's line",
    )


@pytest.mark.django_db
def test_the_pending_count_is_said_at_most_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    start = datetime(2031, 5, 17, 9, 0, 5, tzinfo=UTC)  # a minute no other test logs in

    def pending_lines() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "runs pending" in r.getMessage()]

    caplog.set_level(logging.INFO, logger="vouch.verification")
    with time_machine.travel(start, tick=False) as traveller:
        assert tasks.poll() == 0
        assert len(pending_lines()) == 1
        for seconds in (2, 20, 50):  # later ticks of the same minute
            traveller.move_to(start + timedelta(seconds=seconds))
            tasks.poll()
        assert len(pending_lines()) == 1
        traveller.move_to(start + timedelta(seconds=61))
        tasks.poll()
        assert len(pending_lines()) == 2
        assert pending_lines()[-1].levelno == logging.INFO


def test_only_periodic_runs_that_did_nothing_are_idle() -> None:
    assert job_run_idle(task="verification.poll", result=0)
    assert job_run_idle(task="verification.retry_events", result=0)
    assert not job_run_idle(task="verification.poll", result=2)
    assert not job_run_idle(task="verification.attempt", result=None)  # not periodic
    assert not job_run_idle(task="verification.process_event", result=0)  # not periodic
    assert not job_run_idle(task="reconciliation.sweep", result="rec_1")
    assert not job_run_idle(task="core.tasks.sessions_prune", result=None)  # says nothing
    assert not job_run_idle(task=None, result=0)
