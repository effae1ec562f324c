"""The lists people decide by (issue 13): envelopes with a pending-funding marker, refunds with
amount, status and verification verdict, runs verdict first; each searchable by provider id
(charge, refund, PaymentIntent), buyer e-mail and an amount in dollars; every provider id a link
to the Stripe Dashboard; every time in the one format with its zone."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.urls import reverse

from accounts.models import User
from envelopes.models import Envelope, FundingLeg, RefundLeg, RefundOperation
from tests.drivers.api import Api
from tests.helpers import settle_runs
from verification.models import VerificationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    return client


def shown(client: Client, name: str, **query: str) -> set[int]:
    response = client.get(reverse(f"admin:{name}_changelist"), query)
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


@pytest.fixture
def two(alice: Api, bob: Api, sandbox: Any) -> dict[str, Any]:
    """Alice: $12.50 funded then refunded $3.00 (settled); Bob: $7.00, and a $4.00 funding whose
    answer never came (pending)."""
    a = alice.create(12_500_000)["envelope_id"]
    refund = alice.post(f"/api/v1/escrow/envelopes/{a}/refund", {"amount_micro": 3_000_000})
    assert refund.status_code == 200, refund.content
    b = bob.create(7_000_000)["envelope_id"]
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    pending = bob.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 4_000_000, "payment_method": "pm_card_visa"}
    )
    sandbox.clear_faults()
    assert pending.status_code == 202, pending.content
    settle_runs()
    return {
        "alice": Envelope.objects.get(public_id=a),
        "bob": Envelope.objects.get(public_id=b),
        "pending": Envelope.objects.get(public_id=pending.json()["data"]["envelope_id"]),
        "refund": RefundOperation.objects.get(envelope__public_id=a),
    }


def test_a_pending_funding_is_marked_in_the_envelope_list(
    superuser: Client, two: dict[str, Any]
) -> None:
    page = superuser.get(reverse("admin:envelopes_envelope_changelist")).content.decode()
    rows = {
        envelope: page.split(two[envelope].public_id, 1)[1].split("</tr>", 1)[0]
        for envelope in ("alice", "bob", "pending")
    }
    assert "vouch-pending" in rows["pending"]
    assert "$4.00 asked" in rows["pending"]
    assert "vouch-pending" not in rows["alice"]
    assert "vouch-pending" not in rows["bob"]
    assert shown(superuser, "envelopes_envelope", stuck="pending") == {two["pending"].pk}


def test_the_envelope_list_searches_by_provider_id_email_and_dollars(
    superuser: Client, two: dict[str, Any]
) -> None:
    alice, bob = two["alice"], two["bob"]
    funding = FundingLeg.objects.get(envelope=alice)
    leg = RefundLeg.objects.get(operation=two["refund"])
    for term in (funding.charge_id, funding.payment_intent_id, leg.provider_refund_id):
        assert term
        assert shown(superuser, "envelopes_envelope", q=term) == {alice.pk}
    assert shown(superuser, "envelopes_envelope", q="bob@example.com") == {
        bob.pk,
        two["pending"].pk,
    }
    assert shown(superuser, "envelopes_envelope", q="12.50") == {alice.pk}
    assert shown(superuser, "envelopes_envelope", q="$7.00") == {bob.pk}
    # $4.00 is asked by the pending funding; $3.00 is the refund on alice's envelope.
    assert shown(superuser, "envelopes_envelope", q="$4.00") == {two["pending"].pk}
    assert shown(superuser, "envelopes_envelope", q="3.00") == {alice.pk}
    assert shown(superuser, "envelopes_envelope", q="12.501") == set()


def test_the_refund_list_shows_amount_status_verdict_and_links_to_stripe(
    superuser: Client, two: dict[str, Any]
) -> None:
    operation = two["refund"]
    leg = RefundLeg.objects.get(operation=operation)
    assert leg.verification_run is not None
    assert leg.verification_run.verdict == "VERIFIED"
    page = superuser.get(reverse("admin:envelopes_refundoperation_changelist")).content.decode()
    row = page.split(operation.public_id, 1)[1].split("</tr>", 1)[0]
    assert "$3.00" in row
    assert ">Refunded<" in row  # in words, the code as its title
    assert 'title="refunded"' in row
    assert ">Verified<" in row
    assert f'href="https://dashboard.stripe.com/test/refunds/{leg.provider_refund_id}"' in row
    # The refund operation's page and the envelope's page link it too.
    detail = superuser.get(
        reverse("admin:envelopes_refundoperation_change", args=[operation.pk])
    ).content.decode()
    assert f'href="https://dashboard.stripe.com/test/refunds/{leg.provider_refund_id}"' in detail
    funding = FundingLeg.objects.get(envelope=two["alice"])
    envelope_page = superuser.get(
        reverse("admin:envelopes_envelope_change", args=[two["alice"].pk])
    ).content.decode()
    assert f'href="https://dashboard.stripe.com/test/payments/{funding.charge_id}"' in envelope_page
    assert (
        f'href="https://dashboard.stripe.com/test/payments/{funding.payment_intent_id}"'
        in envelope_page
    )
    # Searches.
    for term in (leg.provider_refund_id, funding.charge_id, "alice@example.com", "3.00"):
        assert shown(superuser, "envelopes_refundoperation", q=term) == {operation.pk}, term
    assert shown(superuser, "envelopes_refundoperation", q="bob@example.com") == set()


def test_the_run_list_puts_the_verdict_first_and_searches(
    superuser: Client, two: dict[str, Any]
) -> None:
    leg = RefundLeg.objects.get(operation=two["refund"])
    run = leg.verification_run
    assert run is not None
    response = superuser.get(reverse("admin:verification_verificationrun_changelist"))
    page = response.content.decode()
    header = page.split("<thead>", 1)[1].split("</thead>", 1)[0]
    columns = re.findall(r"column-([a-z_]+)", header)
    assert columns[0] == "verdict_badge"
    row = page.split(run.public_id, 1)[0].rsplit("<tr", 1)[1]
    assert 'title="VERIFIED">Verified<' in row
    assert f"https://dashboard.stripe.com/test/refunds/{leg.provider_refund_id}" in page
    charge_runs = set(
        VerificationRun.objects.filter(input__charge=leg.funding_leg.charge_id).values_list(
            "pk", flat=True
        )
    )
    assert run.pk in charge_runs
    assert len(charge_runs) == 2  # the charge's readback and the refund's
    name = "verification_verificationrun"
    assert shown(superuser, name, q=leg.provider_refund_id) == {run.pk}
    assert shown(superuser, name, q=leg.funding_leg.charge_id) == charge_runs
    assert shown(superuser, name, q="3.00") == {run.pk}
    alice_charge = VerificationRun.objects.get(
        contract_id="stripe.charge.succeeded", input__charge=leg.funding_leg.charge_id
    )
    assert shown(superuser, name, q="12.50") == {alice_charge.pk}


def test_admin_pages_show_times_in_one_format_with_the_zone(superuser: Client, alice: Api) -> None:
    with time_machine.travel(datetime(2026, 12, 1, 6, 30, tzinfo=UTC), tick=False):
        envelope_id = alice.create(2_000_000)["envelope_id"]
    envelope = Envelope.objects.get(public_id=envelope_id)
    # The list (date above time, to stay narrow) and the page, in Vouch's templates and in a
    # read-only field Django's admin renders itself.
    listing = superuser.get(reverse("admin:envelopes_envelope_changelist")).content.decode()
    assert "2026-12-01<br>06:30:00 UTC" in listing
    page = superuser.get(
        reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    ).content.decode()
    field = page.split("field-created_at", 1)[1][:600]
    assert "2026-12-01 06:30:00 UTC" in field
    timeline = page.split('id="envelope-timeline"', 1)[1][:3000]
    assert "2026-12-01 06:30:00 UTC" in timeline
