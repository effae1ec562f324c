"""SPEC §15.3 acceptance 5: an interrupted run resumes from its checkpoint; two runs started
together never overlap. The interruption is real: `manage.py reconcile` is killed (SIGKILL) in the
middle of listing the provider's refunds; its row stays `running`, holding the lane while its
heartbeat is fresh, and once the heartbeat is stale the next run takes it up from its checkpoint
(the pages it had read are not read again) and ends with the totals of a run never interrupted.
A run that cannot read the provider ends `failed` and the next run completes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import User
from core.models import AuditEvent
from envelopes.models import RefundLeg
from envelopes.services import envelope_create, envelope_refund, envelope_top_up
from reconciliation.engine import ReconciliationIncomplete, reconcile
from reconciliation.models import Observation, Run, Seen
from reconciliation.runs import RunInProgress
from stripe_sandbox.client import SandboxControl
from tests.conftest import ROOT
from tests.reconciliation.test_command import command_env, reconcile_command

# Runs in other threads and processes must see what the test wrote (committed).
pytestmark = pytest.mark.django_db(transaction=True)

LISTED = ("refunds", "charges", "disputes")


def many_refunds(owner: User, *, envelopes: int, charges: int) -> int:
    """`envelopes` envelopes of `charges` charges each, every one refunded in full (one refund
    leg per charge), the envelopes at the same time. Returns the number of refunds."""

    def one(_: int) -> None:
        try:
            envelope = envelope_create(
                owner=owner, amount_micro=1_000_000, payment_method="pm_card_visa"
            ).envelope
            for _ in range(charges - 1):
                envelope_top_up(
                    envelope=envelope, amount_micro=1_000_000, payment_method="pm_card_visa"
                )
            envelope_refund(envelope=envelope, actor=owner)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(envelopes) as pool:
        list(pool.map(one, range(envelopes)))
    made = RefundLeg.objects.filter(outcome="accepted").count()
    assert made == envelopes * charges
    return made


def listed(sandbox: SandboxControl) -> dict[str, int]:
    """How many list pages the provider has served, by kind (its own request counters)."""
    requests = sandbox.state()["requests"]
    return {kind: requests.get(f"GET /v1/{kind}", 0) for kind in LISTED}


def pages_of(run: Run, kind: str) -> list[Observation]:
    return list(Observation.objects.filter(run=run, kind=kind).order_by("id"))


def make_stale(run: Run) -> None:
    """The heartbeat as it is once the timeout has passed (rather than waiting that long)."""
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=F("heartbeat_at")
        - timedelta(seconds=settings.RECONCILIATION_HEARTBEAT_TIMEOUT_S + 1)
    )


def test_a_run_killed_while_listing_is_resumed_from_its_checkpoint(
    buyer: User, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    # The provider's own request counts below are exact only if no page is asked twice: under
    # load a page of 100 can take longer than the suite's short read timeout, and be retried.
    settings.STRIPE_READ_TIMEOUT_S = 10.0
    refunds = many_refunds(buyer, envelopes=3, charges=91)  # three pages of refunds
    # One provider call a second: the run is between pages long enough to be caught there.
    process = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile"],
        cwd=ROOT,
        env=command_env(stripe_at_sandbox, RECONCILIATION_MAX_RPS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 90
    while True:  # until its checkpoint shows the second page of refunds read
        run = Run.objects.filter(status="running").first()
        if run is not None and run.checkpoint.get("phase") == "refunds" and run.pages == 2:
            break
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never reached its second page of refunds"
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    _, err = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL, err

    run.refresh_from_db()
    assert run.status == "running"
    second_page = pages_of(run, "refunds")[1]
    assert run.checkpoint == {"phase": "refunds", "after": second_page.listed()[-1]["id"]}
    assert run.compared == {"refund": 200}
    read_before = {o["id"] for page in pages_of(run, "refunds")[:2] for o in page.listed()}

    # Its heartbeat is fresh: it holds the lane, whatever kind of run asks.
    for kind in ("manual", "sweep", "full"):
        with pytest.raises(RunInProgress) as held:
            reconcile(kind=kind)
        assert held.value.run.public_id == run.public_id
    assert Run.objects.count() == 1

    make_stale(run)
    last_before = Observation.objects.filter(run=run).order_by("-id").first()
    assert last_before is not None
    before = listed(stripe_at_sandbox)
    resumed = reconcile(kind="manual")
    during = {kind: n - before[kind] for kind, n in listed(stripe_at_sandbox).items()}

    assert (resumed.public_id, resumed.resumed, resumed.status) == (
        run.public_id,
        1,
        "completed",
    )
    assert (resumed.window_start, resumed.window_end) == (run.window_start, run.window_end)
    # It went on after the second page: the first two were not read again.
    assert during == {"refunds": 1, "charges": 3, "disputes": 1}
    again = list(
        Observation.objects.filter(run=run, kind="refunds", id__gt=last_before.pk).order_by("id")
    )
    assert [page.request["params"].get("starting_after") for page in again] == [
        run.checkpoint["after"]
    ]
    assert not read_before & {o["id"] for page in again for o in page.listed()}
    assert Seen.objects.filter(run=run, object_id__startswith="re_").count() == refunds
    resume = AuditEvent.objects.get(action="reconciliation.resume")
    assert resume.details["checkpoint"] == run.checkpoint

    # The same totals as a run never interrupted.
    whole = reconcile(kind="manual")
    assert whole.public_id != run.public_id
    assert whole.resumed == 0
    assert resumed.compared == whole.compared == {"refund": refunds, "charge": refunds}
    assert (resumed.pages, resumed.provider_calls) == (whole.pages, whole.provider_calls) == (7, 7)
    assert (resumed.opened, resumed.still_open, resumed.expected) == ({}, {}, 0)
    assert (whole.opened, whole.still_open, whole.expected) == ({}, {}, 0)
    assert resumed.report["compared_total"] == whole.report["compared_total"] == 2 * refunds


def test_two_runs_started_together_never_overlap(
    buyer: User, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    many_refunds(buyer, envelopes=1, charges=2)
    settings.RECONCILIATION_MAX_RPS = 5  # a run of some length: the others start during it
    kinds = ("sweep", "full", "manual", "manual")
    gate = threading.Barrier(len(kinds))

    def start(kind: str) -> str:
        try:
            gate.wait()
            return reconcile(kind=kind).public_id
        except RunInProgress as exc:
            return f"in progress: {exc.run.public_id}"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(len(kinds)) as pool:
        outcomes = list(pool.map(start, kinds))
    (ran,) = Run.objects.all()
    assert ran.status == "completed"
    assert sorted(outcomes) == sorted([ran.public_id] + [f"in progress: {ran.public_id}"] * 3)


def test_the_database_holds_one_running_run_per_lane(db: None) -> None:
    now = timezone.now()
    window = {"window_start": now - timedelta(days=7), "window_end": now}
    alive = {"started_at": now, "heartbeat_at": now}
    Run.objects.create(kind="sweep", lane="objects", **window, **alive)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(kind="full", lane="objects", **window, **alive)
    # Another lane, or a run of this lane that is over, is no overlap.
    Run.objects.create(kind="catch_up", lane="events", **window, **alive)
    Run.objects.create(kind="full", lane="objects", status="completed", **window, **alive)
    Run.objects.create(kind="full", lane="objects", status="failed", **window, **alive)
    assert Run.objects.filter(status="running").count() == 2


def test_a_run_that_cannot_read_the_provider_fails_and_the_next_one_completes_it(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    refunds = many_refunds(buyer, envelopes=1, charges=3)
    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")

    failed = reconcile_command(stripe_at_sandbox)
    assert failed.returncode == 2, (failed.stdout, failed.stderr)
    run = Run.objects.get()
    assert run.status == "failed"
    assert "could not complete" in failed.stderr
    assert run.public_id in failed.stderr
    assert run.error
    assert run.finished_at is not None
    assert run.checkpoint == {"phase": "refunds", "done": True}
    assert run.compared == {"refund": refunds}
    fault = stripe_at_sandbox.faults()[0]
    assert fault["hits"] == settings.STRIPE_MAX_ATTEMPTS  # every attempt at the first page

    # Still unreadable: the next run takes it up, and fails again where it stood.
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual")
    run.refresh_from_db()
    assert (run.status, run.resumed, run.compared) == ("failed", 1, {"refund": refunds})

    stripe_at_sandbox.clear_faults()
    before = listed(stripe_at_sandbox)
    done = reconcile_command(stripe_at_sandbox)
    during = {kind: n - before[kind] for kind, n in listed(stripe_at_sandbox).items()}
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert Run.objects.count() == 1
    run.refresh_from_db()
    assert (run.status, run.resumed, run.error) == ("completed", 2, "")
    assert f"Run {run.public_id}:" in done.stdout
    # From its checkpoint: the refunds it had compared are not listed, nor counted, again.
    assert during == {"refunds": 0, "charges": 1, "disputes": 1}
    assert run.compared == {"refund": refunds, "charge": refunds}
    assert run.pages == 3
