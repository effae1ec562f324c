"""The envelope page's one timeline (issue 13): an envelope funded, topped up and refunded through
the API against the sandbox, its runs decided by the engine and the provider's events stored as
the catch-up stores them, shows every journal entry, provider call and answer, attempt, verdict
and event, in time order, each with its provider ids linked to the Stripe Dashboard and a link to
the page that shows it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import stripe
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from envelopes.models import Envelope, RefundLeg
from envelopes.selectors import envelope_timeline
from tests.drivers.api import Api
from tests.helpers import settle_runs
from verification.models import Escalation, ProviderEvent
from verification.services import provider_event_store

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    return client


def _store_events(sdk: stripe.StripeClient) -> int:
    stored = 0
    for event in sdk.v1.events.list(params={"limit": 100}).data:
        data = event.to_dict()
        provider_event_store(event=data, raw=json.dumps(data), source="catch_up")
        stored += 1
    return stored


def test_a_funded_topped_up_refunded_envelope_reads_as_one_timeline(
    alice: Api, sdk: stripe.StripeClient, superuser: Client
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    settle_runs()
    refund = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert refund.status_code == 200, refund.content
    settle_runs()
    assert _store_events(sdk) > 0
    envelope = Envelope.objects.get(public_id=envelope_id)
    legs = list(RefundLeg.objects.filter(operation__envelope=envelope))
    assert len(legs) == 2
    assert all(leg.provider_refund_id.startswith("re_") for leg in legs)

    # A person's escalation about one of its legs, opened and resolved.
    escalation = Escalation.objects.create(
        verdict="CONTRADICTED",
        reason="looked at by a person",
        subject_type="refund_leg",
        subject_id=legs[0].public_id,
    )
    Escalation.objects.filter(pk=escalation.pk).update(
        status="resolved", resolved_at=timezone.now(), resolution="note", resolution_note="ok"
    )

    timeline = envelope_timeline(envelope)
    times = [item.at for item in timeline]
    assert times == sorted(times)
    kinds = [item.kind for item in timeline]
    # Two charges sent and answered; two refund legs reserved, sent and answered; the journal
    # (2 fund, 2 reserve, 2 accept); four runs (two charges, two refunds), each attempt and verdict.
    assert kinds.count("funding") == 2
    assert kinds.count("refund") == 2
    assert kinds.count("provider") == 4
    assert kinds.count("journal") == 6
    assert kinds.count("verdict") == 4
    assert kinds.count("attempt") >= 4
    assert kinds.count("webhook") >= 2  # at least each refund's refund.created
    assert kinds[-2:] == ["escalation", "escalation"]  # opened, then resolved: the latest
    # Causes come before their effects.
    assert kinds.index("funding") < kinds.index("journal") < kinds.index("refund")
    first_refund = kinds.index("refund")
    assert max(i for i, k in enumerate(kinds) if k == "funding") < first_refund
    verdicts = [item for item in timeline if item.kind == "verdict"]
    assert {item.title for item in verdicts} == {"Verdict: verified"}
    assert {item.details for item in verdicts} == {"VERIFIED"}  # the code, for the details line
    attempts = [item for item in timeline if item.kind == "attempt"]
    assert all("(poll)" not in item.title and "(event)" not in item.title for item in attempts)
    assert any("(scheduled check)" in item.title for item in attempts)
    events = [item for item in timeline if item.kind == "webhook"]
    assert any(item.title.startswith("Stripe told Vouch: refund created") for item in events)
    assert all("refund.created" not in item.title for item in events)
    refund_ids = {leg.provider_refund_id for leg in legs}
    webhook_objects = {
        pid for item in timeline if item.kind == "webhook" for pid in item.provider_ids
    }
    assert refund_ids <= webhook_objects
    assert ProviderEvent.objects.filter(type="refund.created").count() >= 2

    page = superuser.get(reverse("admin:envelopes_envelope_change", args=[envelope.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    section = html.split('id="envelope-timeline"')[1].split('<div class="module"')[0]
    rows = re.findall(r'data-kind="([a-z]+)"', section)
    assert rows == kinds
    for leg in legs:
        assert f"https://dashboard.stripe.com/test/refunds/{leg.provider_refund_id}" in section
        assert leg.funding_leg.charge_id in section
        assert leg.verification_run is not None
        run_url = reverse(
            "admin:verification_verificationrun_change", args=[leg.verification_run_id]
        )
        assert run_url in section
    assert reverse("admin:receipts_receipt_changelist") in section
    assert reverse("admin:verification_escalation_change", args=[escalation.pk]) in section
    assert "https://dashboard.stripe.com/test/events/evt_" in section
    # Each row is dated in the site's one format.
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", section)


def test_an_empty_envelope_timeline_is_only_its_pending_charge(
    alice: Api, superuser: Client, sandbox: Any
) -> None:
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    sandbox.clear_faults()
    assert response.status_code == 202, response.content
    envelope = Envelope.objects.get(public_id=response.json()["data"]["envelope_id"])
    timeline = envelope_timeline(envelope)
    assert [item.kind for item in timeline] == ["funding", "provider"]
    assert "pending" in timeline[1].title
    assert timeline[1].tone == "warn"


def test_a_refund_without_an_answer_says_so(alice: Api, sandbox: Any) -> None:
    envelope_id = alice.create(2_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    sandbox.clear_faults()
    assert response.status_code == 202, response.content
    timeline = envelope_timeline(Envelope.objects.get(public_id=envelope_id))
    refund = [item for item in timeline if item.kind in ("refund", "provider")][-2:]
    assert [item.kind for item in refund] == ["refund", "provider"]
    assert "unknown" in refund[1].title
    assert refund[1].tone == "warn"
