"""STYLE §3 / SPEC §3: the provider is never called inside a transaction or while a row is locked.
A spy on the adapter's single request path (the real call still happens) records whether a
database transaction was open at each call, while every flow that reaches the provider runs."""

import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from core import db
from envelopes import services
from envelopes.models import LegOutcome, RefundLeg
from providers.stripe_provider import StripeProvider
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.services import (
    provider_event_process,
    provider_event_store,
    run_attempt,
    runs_claim_due,
)


@pytest.mark.django_db(transaction=True)
def test_no_flow_calls_the_provider_inside_a_transaction(
    alice: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    real_call = StripeProvider._call

    def spy(self: StripeProvider, request: Any, **kwargs: Any) -> Any:
        calls.append(db.in_transaction())
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
    # Answers Stripe keeps as a 500 under the key (issue 36): looked up at once, outside too.
    sandbox.add_fault("/v1/refunds", "apply_then_error", method="POST", times=1)
    alice.post(  # refund_create, replayed 500, then refunds_of_charge
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 500_000}
    )
    sandbox.add_fault("/v1/payment_intents", "apply_then_error", method="POST", times=1)
    alice.top_up(envelope_id, 1_000_000)  # payment_create, replayed 500, then the search
    sandbox.clear_faults()

    assert len(calls) >= 12
    assert not any(calls), (
        f"{calls.count(True)} of {len(calls)} provider calls ran inside a transaction"
    )


@pytest.mark.django_db(transaction=True)
def test_lookups_events_and_adjustments_call_the_provider_outside_transactions(
    alice: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flows issue 10 added: the funding lookup past the key's life (search and read by id),
    `payment_intent.*` and `charge.refunded` events, and an adjustment proposed and approved."""
    from django.contrib.auth.models import Permission

    from accounts.models import User
    from envelopes.adjustments import adjustment_approve, adjustment_propose
    from envelopes.models import FundingLeg

    calls: list[tuple[str, bool]] = []
    real_call = StripeProvider._call

    def spy(self: StripeProvider, request: Any, **kwargs: Any) -> Any:
        calls.append((request.__qualname__, db.in_transaction()))
        return real_call(self, request, **kwargs)

    def person(name: str, app: str, codename: str) -> User:
        user = User.objects.create_user(name, f"{name}@example.com", "pw-123-abc", is_staff=True)
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
        return User.objects.get(pk=user.pk)

    monkeypatch.setattr(StripeProvider, "_call", spy)
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    sandbox.clear_faults()
    stored, _ = provider_event_store(
        event={
            "id": "evt_pi",
            "type": "payment_intent.succeeded",
            "created": 1,
            "data": {
                "object": {
                    "id": "pi_unknown",
                    "object": "payment_intent",
                    "metadata": {"vouch_funding": FundingLeg.objects.get(sequence=2).public_id},
                }
            },
        },
        raw="{}",
    )
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)  # payment_intent_read
    charge = FundingLeg.objects.get(sequence=1).charge_id
    event = {
        "id": "evt_ch",
        "type": "charge.refunded",
        "created": 1,
        "data": {"object": {"id": charge}},
    }
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)  # charge_read
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.stranded_resume(older_than_s=60)  # the funding search, the refunds listing
        leg = RefundLeg.objects.get()
        proposer = person("pia", "envelopes", "add_adjustment")
        approver = person("aron", "reconciliation", "approve_adjustment")
        by_hand = real_call(
            services._provider(),
            lambda options: services._provider()._client.v1.refunds.create(
                params={"charge": leg.funding_leg.charge_id, "amount": 100}
            ),
        ).require()
        adjustment = adjustment_propose(
            actor=proposer,
            kind="leg_accept",
            reason="by hand",
            refund_leg=leg,
            provider_object_id=by_hand["id"],
        )  # refund_read
        adjustment_approve(
            adjustment=adjustment, actor=approver, confirmed_amount_micro=1_000_000
        )  # refund_read again
    sites = {name.split(".")[1] for name, _ in calls if name.startswith("StripeProvider.")}
    assert {
        "payment_intents_with_metadata",  # the funding lookup past the key's life
        "payment_intent_read",  # the payment_intent.succeeded event
        "charge_read",  # the charge.refunded event
        "refunds_of_charge",  # the refund lookup past the key's life
        "refund_read",  # the adjustment, proposed and approved
    } <= sites, sites
    inside = [name for name, in_transaction in calls if in_transaction]
    assert inside == [], f"provider calls inside a transaction: {inside}"
