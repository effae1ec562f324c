"""SPEC §15.3 (issue 24, items 6 and 7): a run's mode (dry or not) and window are fixed when it is
created. A resumed run keeps them; a run asked for with other flags never resumes it (it starts
its own); a dry run never changes money or discrepancies, whatever happened before; the command
prints the window the run actually uses. And a scheduled run that falls due while another runs is
run right after it, never dropped (with a real Celery worker, two tasks due in one tick)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings as django_settings
from django.db.models import F
from django.utils import timezone

from config.celery_app import app
from core.models import AuditEvent
from envelopes.models import Envelope, RefundLeg
from reconciliation import tasks
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.reconciliation.test_command import funded, reconcile_command, refunded
from verification.models import Escalation

# The command runs in a process of its own, the worker in threads: they must see what the test
# wrote (committed).
pytestmark = pytest.mark.django_db(transaction=True)

WINDOW_LINE = re.compile(r"^Reconciling (\S+) \.\. (\S+)( \(dry run\))?")


def printed_window(stdout: str) -> tuple[datetime, datetime, bool]:
    """The window the command said it reconciles (the first line), and whether dry."""
    match = WINDOW_LINE.match(stdout.splitlines()[0])
    assert match, stdout
    start, end = (datetime.fromisoformat(m.replace("Z", "+00:00")) for m in match.group(1, 2))
    return start, end, bool(match.group(3))


def assert_prints_its_window(stdout: str, run: Run) -> None:
    start, end, dry = printed_window(stdout)
    # Printed to the second: the run's window, not the one the flags would have made now.
    assert abs(start - run.window_start) < timedelta(seconds=1), (stdout, run.window_start)
    assert abs(end - run.window_end) < timedelta(seconds=1), (stdout, run.window_end)
    assert dry == run.dry_run


def failed_refund(alice: Api, sandbox: SandboxControl) -> RefundLeg:
    """A $3.00 refund Vouch counts as refunded that the provider shows failed (and never told
    Vouch): the one automatic correction gives it back, in a real run only."""
    leg = refunded(alice, funded(alice), 3_000_000)
    sandbox.set_refund_status(leg.provider_refund_id, "failed")
    return leg


def unspent(leg: RefundLeg) -> int:
    return Envelope.objects.get(pk=leg.operation.envelope_id).unspent_micro


def failing(sandbox: SandboxControl, *args: str) -> Run:
    """A command run that cannot read the provider's refunds (500s): it ends failed."""
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    done = reconcile_command(sandbox, *args)
    sandbox.clear_faults()
    assert done.returncode == 2, (done.stdout, done.stderr)
    run = Run.objects.order_by("-id").first()
    assert run is not None
    assert run.status == "failed"
    return run


# --- item 6: mode and window fixed at creation --------------------------------------------------


def test_a_dry_run_after_a_failed_real_run_starts_its_own_and_moves_no_money(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    leg = failed_refund(alice, stripe_at_sandbox)
    before = unspent(leg)
    real = failing(stripe_at_sandbox, "--since", "3d")
    assert real.dry_run is False

    dry = reconcile_command(stripe_at_sandbox, "--dry-run")
    assert dry.returncode == 0, (dry.stdout, dry.stderr)  # opens nothing: it would release
    leg.refresh_from_db()
    assert not leg.released
    assert unspent(leg) == before  # no money moved
    assert Run.objects.count() == 2
    real.refresh_from_db()
    assert (real.status, real.dry_run, real.resumed) == ("failed", False, 0)
    own = Run.objects.exclude(pk=real.pk).get()
    assert (own.dry_run, own.status, own.corrected) == (True, "completed", 1)
    assert own.window_end - own.window_start == timedelta(days=7)  # its own window, not 3 days
    assert_prints_its_window(dry.stdout, own)
    assert not AuditEvent.objects.filter(action="refund.release").exists()
    assert Discrepancy.objects.count() == 0

    # The real run asked again (same flags: none but the window it was given) completes it.
    again = reconcile(kind="manual", since=real.window_start, until=real.window_end)
    assert (again.pk, again.dry_run, again.corrected, again.status) == (
        real.pk,
        False,
        1,
        "completed",
    )
    leg.refresh_from_db()
    assert leg.released
    assert unspent(leg) == before + 3_000_000


def test_a_real_run_after_a_failed_dry_run_starts_its_own_and_records(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    leg = failed_refund(alice, stripe_at_sandbox)
    other = funded(alice)
    stripe_at_sandbox.tamper(other.charge_id, amount=999)
    dry = failing(stripe_at_sandbox, "--dry-run")
    assert dry.dry_run is True

    real = reconcile_command(stripe_at_sandbox)
    assert real.returncode == 1, (real.stdout, real.stderr)  # the tampered charge is open
    own = Run.objects.exclude(pk=dry.pk).get()
    assert (own.dry_run, own.status, own.corrected) == (False, "completed", 1)
    assert_prints_its_window(real.stdout, own)
    leg.refresh_from_db()
    assert leg.released
    assert list(Discrepancy.objects.values_list("code", "first_run")) == [
        ("charge_mismatch", own.pk)
    ]
    dry.refresh_from_db()
    assert (dry.status, dry.resumed) == ("failed", 0)


def test_a_dry_run_resumed_stays_dry_and_changes_nothing(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    leg = failed_refund(alice, stripe_at_sandbox)
    other = funded(alice)
    stripe_at_sandbox.tamper(other.charge_id, amount=999)
    dry = failing(stripe_at_sandbox, "--dry-run")

    again = reconcile_command(stripe_at_sandbox, "--dry-run")  # the same flags: it resumes
    assert again.returncode == 0, (again.stdout, again.stderr)  # would open one: said, not exit 1
    dry.refresh_from_db()
    assert (dry.status, dry.resumed, dry.dry_run, dry.corrected) == ("completed", 1, True, 1)
    assert dry.opened == {"charge_mismatch": 1}
    assert_prints_its_window(again.stdout, dry)
    assert Run.objects.count() == 1
    leg.refresh_from_db()
    assert not leg.released
    assert Discrepancy.objects.count() == 0
    assert Escalation.objects.count() == 0


def test_a_resumed_run_keeps_its_window_and_the_command_prints_it(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    failed = failing(stripe_at_sandbox, "--since", "3d")
    assert failed.window_end - failed.window_start == timedelta(days=3)

    resumed = reconcile_command(stripe_at_sandbox)  # no window asked: it takes the failed run up
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    failed.refresh_from_db()
    assert (failed.status, failed.resumed) == ("completed", 1)
    assert failed.window_end - failed.window_start == timedelta(days=3)
    assert_prints_its_window(resumed.stdout, failed)
    assert f"Resuming run {failed.public_id} from its checkpoint" in resumed.stdout
    assert Run.objects.count() == 1


def test_a_run_asked_for_another_window_never_resumes_a_failed_one(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    failed = failing(stripe_at_sandbox)
    # Its message says how to take it up: its own window, exactly.
    other = reconcile_command(stripe_at_sandbox, "--since", "2d")
    assert other.returncode == 0, (other.stdout, other.stderr)
    own = Run.objects.exclude(pk=failed.pk).get()
    assert own.window_end - own.window_start == timedelta(days=2)
    assert_prints_its_window(other.stdout, own)
    failed.refresh_from_db()
    assert (failed.status, failed.resumed) == ("failed", 0)


def test_the_failure_message_names_the_flags_that_resume_the_run(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    stripe_at_sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    done = reconcile_command(stripe_at_sandbox, "--since", "3d", "--dry-run")
    stripe_at_sandbox.clear_faults()
    assert done.returncode == 2
    run = Run.objects.get()
    said = re.search(r"--since (\S+) --until (\S+) --dry-run", done.stderr)
    assert said, done.stderr
    again = reconcile_command(stripe_at_sandbox, *said.group(0).split())
    assert again.returncode == 0, (again.stdout, again.stderr)
    run.refresh_from_db()
    assert (run.status, run.resumed, Run.objects.count()) == ("completed", 1, 1)


def test_a_dead_run_with_other_flags_is_not_resumed_but_set_aside(alice: Api) -> None:
    funded(alice)
    now = timezone.now()
    stale = now - timedelta(seconds=django_settings.RECONCILIATION_HEARTBEAT_TIMEOUT_S + 1)
    dead = Run.objects.create(
        kind="manual",
        lane="objects",
        dry_run=True,
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=stale,
    )
    real = reconcile(kind="manual")
    assert real.pk != dead.pk
    assert (real.dry_run, real.status) == (False, "completed")
    dead.refresh_from_db()
    assert (dead.status, dead.resumed, dead.dry_run) == ("failed", 0, True)
    assert "its process died" in dead.error


# --- item 7: two runs due in one tick ------------------------------------------------------------


@pytest.fixture
def worker(celery_broker: str) -> Any:
    with app.connection_for_write() as connection:
        for queue in app.conf.task_queues:
            connection.default_channel.queue_purge(queue.name)
    # Two at a time, as a worker with --concurrency=2 takes the beat's tasks of one tick.
    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=30
    ) as started:
        yield started


def test_two_runs_due_in_one_tick_both_run_one_right_after_the_other(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any, worker: Any
) -> None:
    funded(alice)
    settings.RECONCILIATION_MAX_RPS = 2  # each run lasts a few seconds: the other falls due
    tasks.sweep.delay()
    tasks.full.delay()
    deadline = time.monotonic() + 60
    while Run.objects.filter(status="completed").count() < 2:
        assert time.monotonic() < deadline, list(Run.objects.values_list("kind", "status"))
        time.sleep(0.2)
    first, second = Run.objects.order_by("started_at")
    assert {first.kind, second.kind} == {"sweep", "full"}
    assert first.finished_at is not None
    assert second.started_at >= first.finished_at  # right after it, never overlapping
    assert second.started_at - first.finished_at < timedelta(seconds=10)
    queued = AuditEvent.objects.get(action="reconciliation.queue")
    assert queued.details["kind"] == second.kind
    assert queued.details["behind"] == first.public_id


def test_a_scheduled_run_due_while_a_manual_run_holds_the_lane_runs_after_it(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any, worker: Any
) -> None:
    funded(alice)
    now = timezone.now()
    holder = Run.objects.create(
        kind="manual",
        lane="objects",
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=now,
    )
    tasks.full.delay()
    deadline = time.monotonic() + 20
    while not AuditEvent.objects.filter(action="reconciliation.queue").exists():
        assert time.monotonic() < deadline, "the full run was not queued"
        time.sleep(0.1)
    assert not Run.objects.filter(kind="full").exists()
    # The holder (a process of its own, here finished by hand) completes: whoever holds the lane
    # hands it on.
    Run.objects.filter(pk=holder.pk).update(
        heartbeat_at=F("heartbeat_at")
        - timedelta(seconds=django_settings.RECONCILIATION_HEARTBEAT_TIMEOUT_S + 1)
    )
    resumed = reconcile(kind="manual")
    assert resumed.pk == holder.pk
    deadline = time.monotonic() + 30
    while not Run.objects.filter(kind="full", status="completed").exists():
        assert time.monotonic() < deadline, list(Run.objects.values_list("kind", "status"))
        time.sleep(0.2)
    full = Run.objects.get(kind="full")
    assert resumed.finished_at is not None
    assert full.started_at >= resumed.finished_at
