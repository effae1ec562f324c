"""Unknown outcomes resumed, and later failures giving money back exactly once (SPEC §2, §3)."""

import json
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from envelopes import services
from envelopes.models import Envelope, FundingLeg, JournalEntry, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import ProviderEvent
from verification.services import (
    provider_event_process,
    provider_event_store,
    run_attempt,
    runs_claim_due,
)

pytestmark = pytest.mark.django_db


def test_an_unknown_refund_outcome_is_pending_then_resumed(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=700)
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code == 202
    data = response.json()["data"]
    assert data["status"] == "pending"
    assert [leg["outcome"] for leg in data["legs"]] == ["unknown"]
    assert data["balances"]["reserved_micro"] == 5_000_000  # never assumed either way
    assert data["pending_micro"] == 5_000_000
    sandbox.clear_faults()
    services.stranded_resume(older_than_s=-1)
    leg = RefundLeg.objects.get()
    assert leg.outcome == LegOutcome.ACCEPTED
    assert sandbox.state()["counts"]["refunds"] == 1
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.reserved_micro, envelope.total_refunded_micro) == (0, 5_000_000)
    assert ledger_breaches() == []


def test_an_unknown_funding_outcome_is_a_pending_leg_not_money(
    alice: Api, sandbox: SandboxControl
) -> None:
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == 202
    data = response.json()["data"]
    assert data["funding_legs"][0]["status"] == "pending"
    assert (data["total_funded_micro"], data["unspent_micro"]) == (0, 0)
    sandbox.clear_faults()
    services.stranded_resume(older_than_s=-1)
    leg = FundingLeg.objects.get()
    assert leg.status == "succeeded"
    assert Envelope.objects.get().unspent_micro == 2_000_000
    assert sandbox.state()["counts"]["payment_intents"] == 1


def _verify_now(leg: RefundLeg) -> None:
    with time_machine.travel(timezone.now() + timedelta(seconds=30), tick=True):
        run = leg.verification_run
        assert run is not None
        run.__class__.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
        for run_id, token in runs_claim_due(limit=10):
            run_attempt(run_id=run_id, token=token, trigger="poll")


def test_a_failed_verdict_releases_the_leg_once(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "lost_or_stolen_card")
    _verify_now(leg)
    leg.refresh_from_db()
    assert leg.verification_run is not None
    assert leg.verification_run.verdict == "FAILED"
    assert leg.released is True
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (0, 5_000_000)
    # A refund.failed event noticed afterwards releases nothing more.
    event = {
        "id": "evt_f",
        "type": "refund.failed",
        "created": 1,
        "data": {"object": {"id": leg.provider_refund_id}},
    }
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    assert JournalEntry.objects.filter(kind="release", refund_leg=leg).count() == 1
    shown = alice.get(f"/api/v1/escrow/refunds/{leg.operation.public_id}").json()["data"]
    assert shown["legs"][0]["verification_verdict"] == "FAILED"
    assert shown["failed_micro"] == 2_000_000
    assert shown["verification_status"] == "attention"
    assert ledger_breaches() == []


def test_refund_failed_after_verified_gives_the_money_back(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    leg = RefundLeg.objects.get()
    _verify_now(leg)
    leg.refresh_from_db()
    assert leg.verification_run is not None
    assert leg.verification_run.verdict == "VERIFIED"
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "expired_or_canceled_card")
    event = {
        "id": "evt_g",
        "type": "refund.failed",
        "created": 1,
        "data": {"object": {"id": leg.provider_refund_id}},
    }
    for _ in range(2):  # delivered twice: released once
        stored, _ = provider_event_store(event=event, raw=json.dumps(event))
        provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (0, 5_000_000)
    assert JournalEntry.objects.filter(kind="release").count() == 1
    assert ProviderEvent.objects.get().duplicates == 1
    assert ledger_breaches() == []


def test_a_stale_failure_event_for_a_refund_that_did_not_fail_moves_nothing(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    leg = RefundLeg.objects.get()
    event = {
        "id": "evt_h",
        "type": "refund.failed",
        "created": 1,
        "data": {"object": {"id": leg.provider_refund_id}},
    }
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert envelope.total_refunded_micro == 5_000_000  # the provider re-read says succeeded
    assert not JournalEntry.objects.filter(kind="release").exists()


def test_an_answer_recorded_twice_moves_money_once(alice: Api, sandbox: SandboxControl) -> None:
    from envelopes.models import RefundOperation
    from providers import provider_from_settings

    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=700)
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    sandbox.clear_faults()
    leg = RefundLeg.objects.select_related("funding_leg", "operation__envelope").get()
    assert leg.outcome == LegOutcome.UNKNOWN
    # The retry and the resume job both get the provider's (replayed) answer and record it.
    outcome = provider_from_settings().refund_create(
        charge=leg.funding_leg.charge_id,
        amount_cents=500,
        idempotency_key=leg.idempotency_key,
        metadata={
            "vouch_envelope": envelope_id,
            "vouch_refund": leg.operation.public_id,
            "vouch_leg": leg.public_id,
        },
    )
    assert outcome.accepted
    first = services.refund_leg_record(leg=leg, outcome=outcome)
    second = services.refund_leg_record(
        leg=RefundLeg.objects.select_related("funding_leg", "operation").get(), outcome=outcome
    )
    assert first.outcome == second.outcome == LegOutcome.ACCEPTED
    assert JournalEntry.objects.filter(kind="accept").count() == 1
    assert Envelope.objects.get(public_id=envelope_id).total_refunded_micro == 5_000_000
    assert RefundOperation.objects.count() == 1
    assert second.verification_run_id == first.verification_run_id
    assert ledger_breaches() == []
