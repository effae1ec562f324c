"""Issue 37's mutation bullet for reconciliation/events.py
(bench/mutation/reconciliation.events.toml): what a Dashboard refund's event compares and records,
rule by rule. A charge whose refunds Vouch accounts for — refunded, or still in flight with no
answer yet — costs one read and records no run; a refund nobody here made is compared in a
completed run of the events lane, audited with what it opened and what it saw again."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from typing import Any

import pytest
import stripe

from core.models import AuditEvent
from envelopes import services
from envelopes.models import FundingLeg, LegOutcome, RefundLeg
from reconciliation.models import Discrepancy, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import ProviderEvent
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    assert ProviderEvent.objects.get(pk=stored.pk).processed_at is not None


def _latest(sdk: stripe.StripeClient, event_type: str) -> dict[str, Any]:
    return sdk.v1.events.list(params={"type": event_type, "limit": 1}).data[0].to_dict()


def test_the_event_of_a_refund_vouch_made_records_no_run(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code == 200, response.content
    assert FundingLeg.objects.get().refunded_micro == 5_000_000  # exactly what Stripe shows

    _deliver(_latest(sdk, "charge.refunded"))
    _deliver(_latest(sdk, "refund.created"))

    assert not Run.objects.exists()
    assert not Discrepancy.objects.exists()
    assert not AuditEvent.objects.filter(action="reconciliation.event_compare").exists()


def test_the_event_of_a_refund_still_in_flight_at_vouch_records_no_run(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    # Stripe makes the refund, its answer is lost: Vouch's leg is unknown, the money reserved.
    stripe_at_sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    stripe_at_sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code == 202
    stripe_at_sandbox.clear_faults()
    assert stripe_at_sandbox.state()["counts"]["refunds"] == 1  # made, at the provider
    funding = FundingLeg.objects.get()
    assert (funding.refunded_micro, funding.reserved_micro) == (0, 5_000_000)
    assert RefundLeg.objects.get().outcome == LegOutcome.UNKNOWN

    _deliver(_latest(sdk, "charge.refunded"))

    # The money in flight is Vouch's own refund: nothing foreign, no run.
    assert not Run.objects.exists()
    assert not Discrepancy.objects.exists()
    services.stranded_resume(older_than_s=-1)
    assert RefundLeg.objects.get().outcome == LegOutcome.ACCEPTED


def test_the_comparison_is_a_completed_events_run_naming_the_event_and_audited(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(5_000_000)
    charge = data["funding_legs"][0]["charge"]
    sdk.v1.refunds.create(params={"charge": charge, "amount": 500})  # the Dashboard
    event = _latest(sdk, "charge.refunded")

    _deliver(event)

    run = Run.objects.get()
    assert (run.kind, run.lane, run.status) == ("catch_up", "events", "completed")
    audit = AuditEvent.objects.get(action="reconciliation.event_compare")
    assert audit.actor is None
    assert (audit.target_type, audit.target_id) == ("reconciliation_run", run.public_id)
    assert audit.details == {
        "event": event["id"],
        "type": "charge.refunded",
        "charge": charge,
        "opened": {"refund_foreign": 1},
        "seen_again": {},
    }

    again = _latest(sdk, "refund.created")
    _deliver(again)

    assert Run.objects.exclude(pk=run.pk).get().kind == "catch_up"
    audit = AuditEvent.objects.filter(action="reconciliation.event_compare").latest("id")
    assert audit.details == {
        "event": again["id"],
        "type": "refund.created",
        "charge": charge,
        "opened": {},
        "seen_again": {"refund_foreign": 1},
    }


def test_a_dashboard_refund_beside_one_vouch_made_opens_its_discrepancy(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 200, response.content
    foreign = sdk.v1.refunds.create(params={"charge": charge, "amount": 100})  # the Dashboard

    _deliver(_latest(sdk, "charge.refunded"))  # Stripe shows $3.00 refunded, Vouch counts $2.00

    discrepancy = Discrepancy.objects.get()
    assert (discrepancy.code, discrepancy.subject_id) == ("refund_foreign", foreign.id)
    assert discrepancy.amount_micro == 1_000_000


def test_the_events_run_stores_each_read_it_compared_and_counts_them(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    data = alice.create(5_000_000)
    charge = data["funding_legs"][0]["charge"]
    foreign = sdk.v1.refunds.create(params={"charge": charge, "amount": 500})  # the Dashboard

    _deliver(_latest(sdk, "charge.refunded"))

    run = Run.objects.get()
    assert (run.pages, run.provider_calls) == (1, 2)  # the refunds' one page, the charge
    page = run.observations.get(kind="refunds")
    assert page.request["path"] == "/v1/refunds"
    assert page.request["params"]["charge"] == charge
    assert [r["id"] for r in page.listed()] == [foreign.id]
    read = run.observations.get(kind="charge")
    assert read.request == {"path": f"/v1/charges/{charge}", "http_status": 200}
    assert read.answer()["amount_refunded"] == 500
    # Stored as the bytes Stripe sent (the same bytes a second read receives), not re-serialized.
    request = urllib.request.Request(  # noqa: S310 (the sandbox's own http URL)
        f"{stripe_at_sandbox.url}/v1/charges/{charge}",
        headers={"Authorization": "Bearer sk_test_vouch_tests"},
    )
    with urllib.request.urlopen(request) as answer:  # noqa: S310
        received = answer.read()
    assert read.body_bytes() == received
    assert read.sha256 == hashlib.sha256(received).hexdigest()
    assert run.observations.count() == 2
