"""STYLE §3 / SPEC §3: the provider is never called inside a transaction or while a row is locked.
A spy on the adapter's single request path (the real call still happens) records whether a
database transaction was open at each call, while every flow that reaches the provider runs."""

import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from envelopes import services
from envelopes.models import LegOutcome, RefundLeg
from providers.stripe_provider import StripeProvider
from stripe_sandbox.client import SandboxControl
from verification.services import (
    provider_event_process,
    provider_event_store,
    run_attempt,
    runs_claim_due,
)

from .conftest import Api


@pytest.mark.django_db(transaction=True)
def test_no_flow_calls_the_provider_inside_a_transaction(
    alice: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    real_call = StripeProvider._call

    def spy(self: StripeProvider, request: Any, **kwargs: Any) -> Any:
        calls.append(connection.in_atomic_block)
        return real_call(self, request, **kwargs)

    monkeypatch.setattr(StripeProvider, "_call", spy)

    envelope_id = alice.create(5_000_000)["envelope_id"]  # payment_create
    alice.top_up(envelope_id, 2_000_000)  # payment_create
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=700)
    alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}
    )  # refund_create
    sandbox.clear_faults()
    services.stranded_resume(older_than_s=-1)  # refund_create again, same key
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    old = RefundLeg.objects.order_by("id").last()
    assert old is not None
    RefundLeg.objects.filter(pk=old.pk).update(
        outcome=LegOutcome.UNKNOWN
    )  # as if its answer was lost
    with time_machine.travel(timezone.now() + timedelta(hours=24), tick=True):
        services.stranded_resume(older_than_s=-1)  # past the key's life: refunds_of_charge
        for run_id, token in runs_claim_due(limit=10):
            run_attempt(run_id=run_id, token=token, trigger="poll")  # http verifier: refund_read
    leg = RefundLeg.objects.order_by("id").first()
    assert leg is not None
    event = {
        "id": "evt_x",
        "type": "refund.failed",
        "created": 1,
        "data": {"object": {"id": leg.provider_refund_id}},
    }
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)  # refund_read

    assert len(calls) >= 8
    assert not any(calls), (
        f"{calls.count(True)} of {len(calls)} provider calls ran inside a transaction"
    )
