"""The engine through its services, on PostgreSQL, against the sandbox: every condition, rule and
timing member of the reference contract produces its verdict, class and reason (acceptance 1)."""

from collections.abc import Callable
from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.test import TestCase
from django.utils import timezone

from accounts.services import demo_users_ensure
from core.models import AuditEvent
from stripe_sandbox.client import SandboxControl
from verification.models import Escalation, Notification, RunKey, VerificationRun
from verification.services import (
    provider_event_process,
    run_attempt,
    run_claim_for_event,
    runs_claim_due,
    runs_claim_monitor_due,
    verification_start,
)

from .conftest import Enqueued, Refunds

pytestmark = pytest.mark.django_db


def attempt_now(
    run: VerificationRun, *, after_s: float = 0, trigger: str = "poll"
) -> VerificationRun:
    """Claim the run and make one attempt `after_s` seconds from now."""
    with time_machine.travel(timezone.now() + timedelta(seconds=after_s), tick=True):
        if trigger == "poll":
            VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
            claimed = dict(runs_claim_due(limit=10))
            token = claimed[run.pk]
            others = [pk for pk in claimed if pk != run.pk]  # leave the other due runs alone
            VerificationRun.objects.filter(pk__in=others).update(leased_until=None, lease_token="")
        else:
            token = run_claim_for_event(run_id=run.pk) or ""
        with TestCase.captureOnCommitCallbacks(execute=True):  # e-mails go out on commit
            run_attempt(run_id=run.pk, token=token, trigger=trigger)
    run.refresh_from_db()
    return run


AFTER_WINDOW = 25  # seconds: past the 20 s stale-read window


def test_refund_verified_from_readback_and_webhook(refunds: Refunds) -> None:
    run = refunds.make(refunds.charge())
    assert refunds.store_events() == 1
    run = attempt_now(run, after_s=2)
    assert (run.verdict, run.verdict_class, run.verdict_reason) == (
        "VERIFIED",
        "",
        "All verified conditions hold.",
    )
    attempt = run.attempts.get()
    assert run.decided_by == attempt
    observations = {o.channel: o for o in attempt.observations.all()}
    assert set(observations) == {"refund_readback", "refund_created_events"}
    assert observations["refund_readback"].data["id"] == run.action_result["id"]
    assert observations["refund_readback"].level == "E2"
    assert observations["refund_created_events"].data["count"] == 1
    assert len(observations["refund_readback"].digest) == 64
    assert {c["name"]: c["result"] for c in attempt.conditions}["refund_present"] == "true"
    assert not Escalation.objects.exists()


def test_correlation_keys_are_resolved_and_start_is_idempotent(refunds: Refunds) -> None:
    charge = refunds.charge()
    run = refunds.make(charge)
    assert run.correlation == {
        "refund_id": run.action_result["id"],
        "idempotency_key": run.operation_id,
        "charge": charge,
        "amount": 500,
    }
    assert RunKey.objects.filter(run=run).count() == 4
    again = verification_start(
        contract_id=run.contract_id,
        operation_id=run.operation_id,
        operation_created_at=run.operation_created_at,
        input=run.input,
        action_result=run.action_result,
    )
    assert again.pk == run.pk
    with pytest.raises(ValueError, match="required correlation key refund_id"):
        verification_start(
            contract_id="stripe.refund.created",
            operation_id="x",
            operation_created_at=timezone.now(),
            input={},
            action_result={},
        )


def test_canceled_refund_is_contradicted_and_escalated_to_ops(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    demo_users_ensure(
        users={"oscar": {"password": "pw-oscar-123", "email": "oscar@example.com", "staff": True}}
    )
    run = refunds.make(refunds.charge())
    sandbox.set_refund_status(run.action_result["id"], "requires_action")
    sandbox.set_refund_status(run.action_result["id"], "canceled")
    run = attempt_now(run, after_s=AFTER_WINDOW)
    assert (run.verdict, run.verdict_class) == ("CONTRADICTED", "reversed")
    assert run.verdict_reason == "The refund was canceled. No funds will move."
    escalation = Escalation.objects.get(run=run)
    assert (escalation.status, escalation.verdict, escalation.verdict_class) == (
        "open",
        "CONTRADICTED",
        "reversed",
    )
    notification = Notification.objects.get(escalation=escalation)
    assert notification.recipients == ["oscar@example.com"]
    assert notification.sent_at is not None
    assert [m.to for m in mail.outbox] == [["oscar@example.com"]]
    assert "CONTRADICTED" in mail.outbox[0].subject
    assert AuditEvent.objects.filter(action="escalation.open", target_id=run.public_id).exists()


def test_failed_refund_is_failed_without_escalation(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    run = refunds.make(refunds.charge())
    sandbox.set_refund_status(run.action_result["id"], "failed", "lost_or_stolen_card")
    run = attempt_now(run, after_s=AFTER_WINDOW)
    assert (run.verdict, run.verdict_reason) == ("FAILED", "The provider reports a failed refund.")
    assert not Escalation.objects.exists()


@pytest.mark.parametrize(
    ("input_changes", "klass", "reason"),
    [
        ({"amount": 501}, "wrong amount", "The provider refunded a different amount."),
        (
            {"charge": "ch_not_this_one"},
            "wrong subject",
            "The refund belongs to a different charge.",
        ),
    ],
)
def test_wrong_amount_and_wrong_charge(
    refunds: Refunds, input_changes: dict, klass: str, reason: str
) -> None:
    run = refunds.make(refunds.charge(), input_changes=input_changes)
    run = attempt_now(run, after_s=AFTER_WINDOW)
    assert (run.verdict, run.verdict_class, run.verdict_reason) == ("CONTRADICTED", klass, reason)


def test_refund_older_than_the_operation_proves_nothing(refunds: Refunds) -> None:
    run = refunds.make(refunds.charge(), started=timezone.now() + timedelta(minutes=10))
    run = attempt_now(run, after_s=600 + AFTER_WINDOW)
    assert (run.verdict, run.verdict_class) == ("CONTRADICTED", "pre existing state")


def test_unexpected_refund_beside_ours_is_a_duplicate_side_effect(refunds: Refunds) -> None:
    charge = refunds.charge()
    run = refunds.make(charge)
    refunds.sdk.v1.refunds.create(params={"charge": charge, "amount": 100})  # no Vouch metadata
    assert refunds.store_events() == 2
    run = attempt_now(run, after_s=AFTER_WINDOW)
    assert (run.verdict, run.verdict_class) == ("CONTRADICTED", "duplicate side effect")
    events = run.attempts.get().observations.get(channel="refund_created_events").data
    assert events["count"] == 2
    assert Escalation.objects.filter(run=run, verdict_class="duplicate side effect").exists()


def test_two_vouch_refunds_on_one_charge_in_the_same_second_are_both_verified(
    refunds: Refunds,
) -> None:
    charge = refunds.charge()
    first, second = refunds.make(charge), refunds.make(charge)
    assert first.action_result["created"] == second.action_result["created"]
    refunds.store_events()
    for run in (first, second):
        run = attempt_now(run, after_s=2)
        assert run.verdict == "VERIFIED"
        assert (
            run.attempts.get().observations.get(channel="refund_created_events").data["count"] == 1
        )


def test_duplicate_after_verified_escalates_without_changing_the_verdict(
    refunds: Refunds, enqueue: Callable[[int, str, str], None], enqueued: Enqueued
) -> None:
    charge = refunds.charge()
    run = refunds.make(charge)
    refunds.store_events()
    run = attempt_now(run, after_s=2)
    assert run.verdict == "VERIFIED"
    refunds.sdk.v1.refunds.create(params={"charge": charge, "amount": 100})
    refunds.store_events()
    from verification.models import ProviderEvent

    newest = ProviderEvent.objects.order_by("-id").first()
    assert newest is not None
    assert provider_event_process(event_pk=newest.pk, enqueue=enqueue) == [run.pk]
    assert enqueued == [(run.pk, "", "monitor")]
    # Inside the stale-read window the duplicate is held, as it would be before a verdict.
    run_attempt(run_id=run.pk, token="", trigger="monitor")
    run.refresh_from_db()
    assert run.verdict == "VERIFIED"
    assert not Escalation.objects.exists()
    assert run.monitor_at is not None  # looked at again when the window ends
    assert runs_claim_monitor_due() == []  # not yet
    # After the window the poll takes the run again, and the same observation escalates.
    with time_machine.travel(timezone.now() + timedelta(seconds=AFTER_WINDOW), tick=True):
        assert runs_claim_monitor_due() == [run.pk]
        assert runs_claim_monitor_due() == []  # taken once
        run_attempt(run_id=run.pk, token="", trigger="monitor")
    run.refresh_from_db()
    assert run.verdict == "VERIFIED"
    escalation = Escalation.objects.get(run=run)
    assert escalation.verdict_class == "duplicate side effect"
    assert escalation.reason.startswith("After VERIFIED")


def test_stale_read_window_holds_a_failure_then_decides(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    run = refunds.make(refunds.charge())
    sandbox.set_refund_status(run.action_result["id"], "failed")
    run = attempt_now(run, after_s=5)
    assert run.verdict == "PENDING"
    held = run.attempts.get()
    assert held.verdict == "PENDING"
    assert held.held == "FAILED: The provider reports a failed refund."
    assert held.observations.get(channel="refund_readback").data["status"] == "failed"
    run = attempt_now(run, after_s=AFTER_WINDOW)
    assert run.verdict == "FAILED"


def test_a_held_failure_is_read_again_when_the_window_ends_not_at_the_backoff(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    """A FAILED outcome held by the stale-read window is due the moment the window ends: the next
    attempt is scheduled then, not at the backoff's next step (the soak saw verdicts of refunds the
    provider failed wait until 36-44 s, for a window that ended at 20 s)."""
    run = refunds.make(refunds.charge())
    sandbox.set_refund_status(run.action_result["id"], "failed")
    window_ends = run.operation_created_at + timedelta(seconds=20)
    run = attempt_now(run, after_s=1)  # attempt 1: held; the backoff would wait 5 s
    assert run.verdict == "PENDING"
    assert run.attempts.get().held
    assert run.next_attempt_at is not None
    assert run.next_attempt_at <= run.operation_created_at + timedelta(seconds=7)
    for _ in range(2):  # attempts 2 and 3: the backoff (10 s, then 20 s) passes the window's end
        run = attempt_now(run, after_s=(run.next_attempt_at - timezone.now()).total_seconds())
        assert run.verdict == "PENDING"
    assert run.next_attempt_at == window_ends
    run = attempt_now(run, after_s=(window_ends - timezone.now()).total_seconds() + 0.01)
    assert run.verdict == "FAILED"


def test_readback_lag_inside_the_window_never_contradicts(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    sandbox.readback_lag(60_000)
    run = refunds.make(refunds.charge())
    run = attempt_now(run, after_s=1)
    assert run.verdict == "PENDING"
    attempt = run.attempts.get()
    assert attempt.observations.get(channel="refund_readback").data["found"] is False
    results = {c["name"]: c["result"] for c in attempt.conditions if c["kind"] != "verified"}
    assert "true" not in results.values()
    assert results["refund_on_wrong_charge"] == "unknown"
    assert results["canceled"] == "unknown"


def test_schedule_initial_delay_backoff_and_event_attempts(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    sandbox.readback_lag(3_600_000)  # the readback never shows: the run keeps waiting
    run = refunds.make(refunds.charge())
    assert run.next_attempt_at == run.operation_created_at + timedelta(seconds=1)  # initial delay
    gaps = []
    for _ in range(4):
        before = timezone.now()
        run = attempt_now(run)
        gaps.append(round((run.next_attempt_at - before).total_seconds()))
    assert gaps == [5, 10, 20, 40]  # poll interval 5 s, factor 2
    assert run.attempts_made == 4
    scheduled = run.next_attempt_at
    run = attempt_now(run, trigger="event")
    assert (run.attempts_made, run.next_attempt_at) == (4, scheduled)  # events leave the schedule
    assert run.attempts.last().number is None


def test_attempts_exhausted_give_unverifiable_with_an_escalation(
    refunds: Refunds, sandbox: SandboxControl
) -> None:
    sandbox.readback_lag(3_600_000)
    run = refunds.make(refunds.charge(), contract="test.refund.short")
    for _ in range(8):
        run = attempt_now(run)
    assert (run.verdict, run.verdict_reason) == (
        "UNVERIFIABLE",
        "evidence_unavailable_before_timeout",
    )
    assert run.attempts_made == 8
    assert Escalation.objects.get(run=run).verdict == "UNVERIFIABLE"


def test_timeout_gives_unverifiable(refunds: Refunds, sandbox: SandboxControl) -> None:
    sandbox.readback_lag(3_600_000)
    run = refunds.make(refunds.charge(), contract="test.refund.short")
    run = attempt_now(run, after_s=8)
    assert run.verdict == "UNVERIFIABLE"
    assert run.attempts_made == 1


def test_a_lost_lease_discards_the_attempt(refunds: Refunds) -> None:
    run = refunds.make(refunds.charge())
    VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
    [(run_id, token)] = runs_claim_due(limit=5)
    assert run_attempt(run_id=run_id, token="someone-else", trigger="poll") is None
    assert run_attempt(run_id=run_id, token=token, trigger="poll") is not None
    run.refresh_from_db()
    assert run.attempts.count() == 1


def test_event_while_leased_is_owed_an_attempt(
    refunds: Refunds,
    enqueue: Callable[[int, str, str], None],
    enqueued: Enqueued,
    sandbox: SandboxControl,
) -> None:
    sandbox.readback_lag(3_600_000)
    run = refunds.make(refunds.charge())
    VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
    [(run_id, token)] = runs_claim_due(limit=5)
    assert run_claim_for_event(run_id=run_id) is None  # leased: marked instead
    run.refresh_from_db()
    assert run.event_pending is True
    with TestCase.captureOnCommitCallbacks(execute=True):
        run_attempt(run_id=run_id, token=token, trigger="poll", enqueue=enqueue)
    assert [(r, t) for r, _, t in enqueued] == [(run_id, "event")]
    run.refresh_from_db()
    assert run.event_pending is False
