"""End to end: a real Celery worker with beat (a separate process), PostgreSQL, the sandbox
delivering signed webhooks to the app's endpoint (SPEC §6, §7; acceptance 2)."""

import time
from pathlib import Path

import pytest

from stripe_sandbox.client import SandboxControl
from verification.models import Escalation, ProviderEvent, VerificationRun
from verification.services import verification_start

from .conftest import Refunds

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "test.refund.short"  # the refund contract with short timing


def _wait_decided(runs: dict[str, VerificationRun], timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pending = [
            name
            for name, run in runs.items()
            if VerificationRun.objects.get(pk=run.pk).verdict == "PENDING"
        ]
        if not pending:
            return
        assert time.monotonic() < deadline, f"still pending after {timeout} s: {pending}"
        time.sleep(0.2)


@pytest.mark.django_db(transaction=True)
def test_worker_and_beat_decide_every_kind_of_run(
    worker_with_beat: None, refunds: Refunds, sandbox: SandboxControl
) -> None:
    # Reads lag one second behind creation: inside the 1.5 s stale-read window.
    sandbox.readback_lag(1000)
    runs: dict[str, VerificationRun] = {}
    runs["verified"] = refunds.make(refunds.charge(), contract=CONTRACT)

    runs["canceled"] = refunds.make(refunds.charge(), contract=CONTRACT)
    sandbox.set_refund_status(runs["canceled"].action_result["id"], "requires_action")
    sandbox.set_refund_status(runs["canceled"].action_result["id"], "canceled")

    runs["failed"] = refunds.make(refunds.charge(), contract=CONTRACT)
    sandbox.set_refund_status(
        runs["failed"].action_result["id"], "failed", "expired_or_canceled_card"
    )

    duplicated_charge = refunds.charge()
    runs["duplicate"] = refunds.make(duplicated_charge, contract=CONTRACT)
    refunds.sdk.v1.refunds.create(
        params={"charge": duplicated_charge, "amount": 100}
    )  # not Vouch's

    ghost = dict(runs["verified"].action_result, id="re_never_created")
    runs["never"] = verification_start(
        contract_id=CONTRACT,
        operation_id="erf_t:ghost",
        operation_created_at=runs["verified"].operation_created_at,
        input=runs["verified"].input,
        action_result=ghost,
    )

    _wait_decided(runs)
    final = {name: VerificationRun.objects.get(pk=run.pk) for name, run in runs.items()}
    assert {name: (r.verdict, r.verdict_class) for name, r in final.items()} == {
        "verified": ("VERIFIED", ""),
        "canceled": ("CONTRADICTED", "reversed"),
        "failed": ("FAILED", ""),
        "duplicate": ("CONTRADICTED", "duplicate side effect"),
        "never": ("UNVERIFIABLE", ""),
    }

    verified = final["verified"]
    decisive = verified.decided_by
    assert decisive is not None
    observed = {o.channel: o.data for o in decisive.observations.all()}
    assert observed["refund_readback"]["id"] == verified.action_result["id"]
    assert observed["refund_created_events"]["count"] == 1  # the webhook arrived and counts
    # Readback lag inside the window never contradicted anything: no attempt held a verdict.
    lagged = [
        a
        for a in verified.attempts.all()
        if a.observations.get(channel="refund_readback").data.get("found") is False
    ]
    assert all(a.held == "" and a.verdict == "PENDING" for a in lagged)

    duplicate = final["duplicate"].decided_by
    assert duplicate is not None
    assert duplicate.observations.get(channel="refund_created_events").data["count"] == 2

    assert final["never"].verdict_reason == "evidence_unavailable_before_timeout"
    escalated = {e.run_id: (e.status, e.verdict) for e in Escalation.objects.all()}
    assert escalated == {
        final["canceled"].pk: ("open", "CONTRADICTED"),
        final["duplicate"].pk: ("open", "CONTRADICTED"),
        final["never"].pk: ("open", "UNVERIFIABLE"),
    }
    # Webhooks were stored once each, with the signature checked.
    assert ProviderEvent.objects.filter(type="refund.created").count() == 5
    assert {e.processed_at is not None for e in ProviderEvent.objects.all()} == {True}
