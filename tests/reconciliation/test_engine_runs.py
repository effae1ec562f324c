"""A reconciliation run's life, in one process (SPEC §15.3): where a resumed run goes on from its
checkpoint and what the checkpoint carries for it (the charges its findings explain, what a dry
run would release and would open), the queue of runs that fell due while another held the lane,
and the small rules the comparison rests on (what is in flight, ids and metadata read from the
provider's objects, the lazily committed writes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import stripe
from django.db import connection
from django.utils import timezone

from config.celery_app import app
from core.models import AuditEvent
from envelopes.models import FundingLeg, RefundLeg
from reconciliation import engine
from reconciliation.engine import (
    ReconciliationIncomplete,
    reconcile,
    reconcile_due,
    reconcile_queued,
)
from reconciliation.models import Discrepancy, DueRun, Run, Seen
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

LISTED = ("refunds", "charges", "disputes")


def funded(buyer: Api, amount_micro: int = 10_000_000) -> FundingLeg:
    data = buyer.create(amount_micro)
    return FundingLeg.objects.select_related("envelope").get(
        envelope__public_id=data["envelope_id"], sequence=1
    )


def listed(sandbox: SandboxControl) -> dict[str, int]:
    requests = sandbox.state()["requests"]
    return {kind: requests.get(f"GET /v1/{kind}", 0) for kind in LISTED}


def failed_run(checkpoint: dict[str, Any], *, dry_run: bool = False, **counts: Any) -> Run:
    """A manual run that could not complete, stopped where `checkpoint` says."""
    now = timezone.now()
    return Run.objects.create(
        kind="manual",
        lane="objects",
        status="failed",
        dry_run=dry_run,
        window_start=now - timedelta(days=7),
        window_end=now + timedelta(minutes=5),
        started_at=now,
        heartbeat_at=now,
        checkpoint=checkpoint,
        **counts,
    )


# --- resuming -----------------------------------------------------------------------------------


def test_a_resumed_run_goes_on_after_the_phase_its_checkpoint_marks_done(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    stopped = failed_run({"phase": "refunds", "done": True}, compared={"refund": 4}, pages=1)
    before = listed(stripe_at_sandbox)
    run = reconcile(kind="manual")
    during = {kind: n - before[kind] for kind, n in listed(stripe_at_sandbox).items()}
    assert (run.pk, run.status, run.resumed) == (stopped.pk, "completed", 1)
    assert during == {"refunds": 0, "charges": 1, "disputes": 1}
    assert run.compared == {"refund": 4, "charge": 1}  # what it had counted, and the rest
    assert run.pages == 3
    assert run.checkpoint == {"phase": "done"}


def test_a_resumed_run_goes_on_listing_after_the_last_object_its_checkpoint_names(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    first, second = funded(alice), funded(alice)  # listed newest first: second, then first
    stopped = failed_run({"phase": "charges", "after": second.charge_id})
    Seen.objects.create(run=stopped, object_id=second.charge_id)  # its page, read before it stopped
    run = reconcile(kind="manual")
    assert run.pk == stopped.pk
    page = run.observations.get(kind="charges")
    assert page.request["params"]["starting_after"] == second.charge_id
    assert [c["id"] for c in page.listed()] == [first.charge_id]
    assert run.compared == {"charge": 1}


def test_a_resumed_run_keeps_the_explanations_its_findings_gave_before_it_stopped(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount_refunded=300)
    # It had found, before it stopped, a refund-level difference on that charge.
    failed_run({"phase": "refunds", "done": True, "carried": {"explained": [funding.charge_id]}})
    run = reconcile(kind="manual")
    assert run.opened == {}  # explained by the run's own earlier finding
    assert run.checkpoint == {"phase": "done"}

    unexplained = reconcile(kind="manual")
    assert unexplained.opened == {"charge_refunded_mismatch": 1}


def test_a_resumed_dry_run_keeps_what_it_would_release_and_would_open(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    leg = refund_of(alice, funding)
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed")  # nothing refunded now
    carried = {
        "would_release": {funding.charge_id: leg.amount_micro},
        "dry_findings": [["refund_foreign", "refund", "re_found_before"]],
    }
    stopped = failed_run({"phase": "refunds", "done": True, "carried": carried}, dry_run=True)
    run = reconcile(kind="manual", dry_run=True)
    assert (run.pk, run.dry_run) == (stopped.pk, True)
    # With the leg it would release, the charge agrees: only what it had found before.
    assert run.opened == {"refund_foreign": 1}
    assert Discrepancy.objects.count() == 0


def refund_of(buyer: Api, funding: FundingLeg) -> RefundLeg:
    response = buyer.post(
        f"/api/v1/escrow/envelopes/{funding.envelope.public_id}/refund",
        {"amount_micro": 2_000_000},
    )
    assert response.status_code == 200, response.content
    return RefundLeg.objects.get(operation__public_id=response.json()["data"]["refund_id"])


def test_a_stopped_run_carries_its_findings_in_its_checkpoint(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual")
    real = Run.objects.get()
    assert real.checkpoint == {
        "phase": "refunds",
        "done": True,
        "carried": {"explained": [funding.charge_id]},
    }
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual", dry_run=True)
    dry = Run.objects.get(dry_run=True)
    assert dry.checkpoint["carried"] == {
        "explained": [funding.charge_id],
        "dry_findings": [["refund_foreign", "refund", Discrepancy.objects.get().subject_id]],
    }


def test_a_resumed_run_keeps_what_it_had_in_flight(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    refund = sdk.v1.refunds.create(
        params={
            "charge": funding.charge_id,
            "amount": 100,
            "metadata": {"vouch_leg": "rfl_not_here_yet"},
        }
    )
    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual")
    stopped = Run.objects.get()
    assert stopped.checkpoint["carried"] == {"in_flight": {funding.charge_id: 1_000_000}}
    assert stopped.expected == 1
    stripe_at_sandbox.clear_faults()
    resumed = reconcile(kind="manual")
    # The charge shows the refund in flight refunded: that is expected, not a difference.
    assert (resumed.pk, resumed.opened, resumed.expected) == (stopped.pk, {}, 1)
    assert refund.status == "succeeded"


def test_a_stopped_dry_run_carries_what_it_would_release(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    leg = refund_of(alice, funding)
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed")
    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual", dry_run=True)
    dry = Run.objects.get()
    assert dry.checkpoint["carried"] == {"would_release": {funding.charge_id: 2_000_000}}
    assert dry.corrected == 1


def test_a_run_asked_for_a_window_takes_up_only_a_failed_run_of_that_window(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    stopped = failed_run({"phase": "refunds", "done": True})
    since_only = reconcile(kind="manual", since=stopped.window_start - timedelta(days=1))
    assert since_only.pk != stopped.pk
    until_only = reconcile(kind="manual", until=stopped.window_end + timedelta(hours=1))
    assert until_only.pk != stopped.pk
    assert until_only.window_end - until_only.window_start == timedelta(days=7)
    stopped.refresh_from_db()
    assert (stopped.status, stopped.resumed) == ("failed", 0)
    exact = reconcile(kind="manual", since=stopped.window_start, until=stopped.window_end)
    assert (exact.pk, exact.resumed, exact.status) == (stopped.pk, 1, "completed")


# --- runs that fall due while another holds the lane ----------------------------------------------


def holder(kind: str = "manual") -> Run:
    now = timezone.now()
    return Run.objects.create(
        kind=kind,
        lane="objects",
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=now,
    )


def test_a_run_due_while_the_lane_is_held_is_queued_once_behind_the_holder(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    held_by = holder()
    assert reconcile_due("full") == []
    assert reconcile_due("full") == []  # falls due again while queued: the same run
    due = DueRun.objects.get()
    assert (due.kind, due.lane, due.behind, due.times) == ("full", "objects", held_by.public_id, 2)
    queued = AuditEvent.objects.get(action="reconciliation.queue")
    assert queued.details == {"kind": "full", "behind": held_by.public_id}
    assert not Run.objects.filter(kind="full").exists()


def test_the_queued_runs_run_oldest_first_once_the_lane_is_free(
    alice: Api, stripe_at_sandbox: SandboxControl, celery_broker: str
) -> None:
    funded(alice)
    held_by = holder()
    reconcile_due("full")
    reconcile_due("sweep")
    Run.objects.filter(pk=held_by.pk).update(status="completed")
    queue = app.conf.task_default_queue
    with app.connection_for_write() as broker:
        broker.default_channel.queue_purge(queue)
        ran = reconcile_queued()
        handed_on = broker.default_channel.queue_purge(queue)
    assert handed_on == 0  # each run here, one after the other: nothing handed to a worker
    assert [r.kind for r in ran] == ["full", "sweep"]
    assert all(r.status == "completed" for r in ran)
    assert ran[0].finished_at is not None
    assert ran[1].started_at >= ran[0].finished_at
    assert not DueRun.objects.exists()


def test_a_due_run_runs_after_its_own_and_a_new_run_of_a_kind_takes_its_place_in_the_queue(
    alice: Api, stripe_at_sandbox: SandboxControl, celery_broker: str
) -> None:
    funded(alice)
    DueRun.objects.create(kind="full", lane="objects", due_at=timezone.now())
    DueRun.objects.create(kind="sweep", lane="objects", due_at=timezone.now())
    queue = app.conf.task_default_queue
    with app.connection_for_write() as broker:
        broker.default_channel.queue_purge(queue)
        ran = reconcile_due("sweep")
        handed_on = broker.default_channel.queue_purge(queue)
    assert [r.kind for r in ran] == ["sweep", "full"]  # the due sweep is this one
    assert not DueRun.objects.exists()
    assert handed_on == 0  # run here, right after: nothing handed to another worker


def test_the_queue_waits_while_the_lane_is_held(alice: Api) -> None:
    DueRun.objects.create(kind="full", lane="objects", due_at=timezone.now())
    holder()
    assert reconcile_queued() == []
    assert DueRun.objects.get().kind == "full"


def test_a_due_run_still_runs_when_the_run_before_it_could_not_complete(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    funded(alice)
    DueRun.objects.create(kind="full", lane="objects", due_at=timezone.now())
    # Every attempt at the sweep's first page of charges fails; then the provider answers.
    stripe_at_sandbox.add_fault(
        "/v1/charges", "server_error", method="GET", times=settings.STRIPE_MAX_ATTEMPTS
    )
    with pytest.raises(ReconciliationIncomplete):
        reconcile_due("sweep")
    assert Run.objects.get(kind="sweep").status == "failed"
    assert Run.objects.get(kind="full").status == "completed"
    assert not DueRun.objects.exists()


def test_a_run_that_ends_hands_a_due_run_to_a_worker(
    alice: Api, stripe_at_sandbox: SandboxControl, celery_broker: str
) -> None:
    queue = app.conf.task_default_queue
    with app.connection_for_write() as broker:
        broker.default_channel.queue_purge(queue)
        reconcile(kind="manual")  # nothing due: nothing sent
        assert broker.default_channel.queue_purge(queue) == 0
        DueRun.objects.create(kind="full", lane="objects", due_at=timezone.now())
        reconcile(kind="manual")
        sent = broker.SimpleQueue(queue)
        message = sent.get(timeout=5)
        message.ack()
        sent.close()
    assert message.headers["task"] == "reconciliation.due"
    assert DueRun.objects.get().kind == "full"  # it runs in the worker, not here


# --- the small rules ---------------------------------------------------------------------------


def context(grace_s: int = 600) -> Any:
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    return engine._Context(
        run=Run(),
        provider=None,  # type: ignore[arg-type]
        budget=None,
        now=now,
        grace=timedelta(seconds=grace_s),
        progress=None,
    )


def test_in_flight_means_inside_the_grace_period_for_datetimes_and_epoch_seconds() -> None:
    ctx = context()
    now = ctx.now
    assert ctx.recent(now - timedelta(seconds=599))
    assert not ctx.recent(now - timedelta(seconds=600))
    epoch = now.timestamp()
    assert ctx.recent(int(epoch) - 599)
    assert ctx.recent(epoch - 599.5)
    assert not ctx.recent(int(epoch) - 600)
    assert ctx.recent(None) is False


def test_ids_and_vouch_metadata_as_the_provider_objects_carry_them() -> None:
    assert engine._id("ch_1") == "ch_1"
    assert engine._id(None) == ""
    assert engine._leg_named({"metadata": {"vouch_leg": "rfl_1"}}) == "rfl_1"
    assert engine._leg_named({"metadata": {}}) == ""
    assert engine._leg_named({"metadata": None}) == ""
    assert engine._leg_named({"metadata": "rfl_1"}) == ""
    assert engine._leg_named({}) == ""
    assert engine._funding_named({"metadata": {"vouch_funding": "fnd_1"}}) == "fnd_1"
    assert engine._funding_named({"metadata": {"vouch_funding": None}}) == ""
    assert engine._funding_named({"metadata": None}) == ""
    assert engine._funding_named({"metadata": "fnd_1"}) == ""
    assert engine._micro(300) == 3_000_000
    assert [engine._micro(v) for v in (None, True, "300", 2.5)] == [0, 0, 0, 0]
    assert engine._submissions({"evidence_details": {"submission_count": 2}}) == 2
    assert engine._submissions({"evidence_details": {}}) == 0
    assert engine._submissions({"evidence_details": None}) == 0
    assert engine._submissions({}) == 0
    assert [engine._taken({"status": s}) for s in ("succeeded", "pending", "failed")] == [
        True,
        True,
        False,
    ]


def test_the_lazily_committed_writes_leave_a_callers_transaction_as_it_is(db: None) -> None:
    # Inside the test's own transaction (pytest-django's): that transaction's commit, untouched.
    assert connection.in_atomic_block
    with engine._committed_lazily():
        assert synchronous_commit() == "on"
    assert synchronous_commit() == "on"


@pytest.mark.django_db(transaction=True)
def test_the_lazily_committed_writes_do_not_wait_for_the_disk() -> None:
    assert not connection.in_atomic_block
    with engine._committed_lazily():
        assert connection.in_atomic_block
        assert synchronous_commit() == "off"
    assert synchronous_commit() == "on"  # for that transaction alone


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        row = cursor.fetchone()
    assert row is not None
    return str(row[0])
