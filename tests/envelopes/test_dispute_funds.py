"""Money a dispute takes (SPEC §18, issue 37), end to end through the sandbox's own events: a
chargeback withdraws the disputed amount at Stripe, and Vouch's ledger follows — the charge's
unspent money is held (never debited, refunded or allocated), a won dispute gives it back, a lost
one charges it back for good, a withdrawal larger than what the charge still had is exposure
escalated to a person, and an inquiry holds nothing and leaves the charge refundable as Stripe
says. Every story reads the events the sandbox emitted (`reconciliation.catch_up`, the path that
also repairs a lost webhook), and checks the ledger after every step.

Before issue 37 each story failed at its first balance: the chargeback left the envelope's
unspent balance as funded (`unspent_micro` 30,000,000 where 0 was due) and the envelope had no
`held_micro` at all."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from disputes.models import Dispute
from envelopes.models import (
    DisputeFunds,
    DisputeFundsStatus,
    Envelope,
    FundingLeg,
    JournalEntry,
)
from envelopes.selectors import ledger_breaches
from reconciliation.catch_up import catch_up_run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs
from verification.models import Escalation

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000


def balances(envelope_id: str) -> dict[str, int]:
    envelope = Envelope.objects.get(public_id=envelope_id)
    return {
        "funded": envelope.total_funded_micro,
        "debited": envelope.total_debited_micro,
        "refunded": envelope.total_refunded_micro,
        "reserved": envelope.reserved_micro,
        "unspent": envelope.unspent_micro,
        "held": envelope.held_micro,
        "charged_back": envelope.charged_back_micro,
    }


def events() -> None:
    """What Stripe told Vouch since the last look: the sandbox's events, listed and processed as
    delivered webhooks are (the catch-up job), and the ledger checked at once."""
    catch_up_run()
    assert ledger_breaches() == []


def fund(buyer: Api, amount_micro: int) -> tuple[str, str]:
    data = buyer.create(amount_micro)
    settle_runs()
    return data["envelope_id"], data["funding_legs"][0]["charge"]


def refund(buyer: Api, envelope_id: str, body: dict[str, Any]) -> Any:
    return buyer.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", body)


def debit(staff: Api, envelope_id: str, amount_micro: int) -> Any:
    return staff.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": amount_micro, "reference": "job-42"},
    )


def test_a_chargeback_holds_the_money_and_a_won_dispute_gives_it_back(
    alice: Api, staff_api: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge = fund(alice, 30 * DOLLAR)
    opened = stripe_at_sandbox.open_dispute(charge, reason="fraudulent")
    events()
    assert balances(envelope_id) == {
        "funded": 30 * DOLLAR,
        "debited": 0,
        "refunded": 0,
        "reserved": 0,
        "unspent": 0,
        "held": 30 * DOLLAR,
        "charged_back": 0,
    }
    funds = DisputeFunds.objects.get(provider_dispute_id=opened["id"])
    assert (funds.status, funds.withdrawn_micro, funds.held_micro, funds.exposure_micro) == (
        DisputeFundsStatus.HELD,
        30 * DOLLAR,
        30 * DOLLAR,
        0,
    )
    assert funds.fees_micro == 15 * DOLLAR  # Stripe's dispute fee, from its balance transaction
    hold = JournalEntry.objects.get(dispute_funds=funds)
    assert (hold.kind, hold.unspent_delta, hold.held_delta) == ("hold", -30 * DOLLAR, 30 * DOLLAR)
    assert hold.provider_read is not None
    assert hold.provider_read.subject == opened["id"]

    # Held money is never refunded nor debited: no provider call is even made.
    asked = refund(alice, envelope_id, {})
    assert (asked.status_code, asked.json()["error"]["code"]) == (409, "nothing_to_refund")
    # Every surface's refusal says why (the message and the details), not only the buyer's page.
    assert "$30.00 is held while your bank reviews a dispute" in asked.json()["error"]["message"]
    assert asked.json()["error"]["details"]["held_micro"] == 30 * DOLLAR
    spent = debit(staff_api, envelope_id, 1 * DOLLAR)
    assert spent.status_code in (409, 422), spent.content
    assert spent.json()["error"]["code"] == "amount_exceeds_unspent"
    assert FundingLeg.objects.get(charge_id=charge).capacity_micro == 0

    # The same events again (a webhook delivered twice, the next catch-up): nothing moves twice.
    events()
    assert balances(envelope_id)["held"] == 30 * DOLLAR
    assert JournalEntry.objects.filter(dispute_funds=funds).count() == 1

    stripe_at_sandbox.set_dispute_status(opened["id"], "won")
    events()
    assert balances(envelope_id) == {
        "funded": 30 * DOLLAR,
        "debited": 0,
        "refunded": 0,
        "reserved": 0,
        "unspent": 30 * DOLLAR,
        "held": 0,
        "charged_back": 0,
    }
    funds.refresh_from_db()
    assert (funds.status, funds.reinstated_micro) == (DisputeFundsStatus.REINSTATED, 30 * DOLLAR)
    # Once given back, it is the buyer's again: refundable in full.
    assert refund(alice, envelope_id, {}).status_code == 200


def test_a_lost_dispute_charges_the_money_back_for_good(
    alice: Api, staff_api: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge = fund(alice, 20 * DOLLAR)
    opened = stripe_at_sandbox.open_dispute(charge, reason="product_not_received")
    events()
    stripe_at_sandbox.set_dispute_status(opened["id"], "lost")
    events()
    assert balances(envelope_id) == {
        "funded": 20 * DOLLAR,
        "debited": 0,
        "refunded": 0,
        "reserved": 0,
        "unspent": 0,
        "held": 0,
        "charged_back": 20 * DOLLAR,
    }
    funds = DisputeFunds.objects.get(provider_dispute_id=opened["id"])
    assert funds.status == DisputeFundsStatus.CHARGED_BACK
    assert [e.kind for e in JournalEntry.objects.filter(dispute_funds=funds).order_by("id")] == [
        "hold",
        "chargeback",
    ]
    # The bank already gave this money back: it can pay for no work.
    assert (
        debit(staff_api, envelope_id, 1 * DOLLAR).json()["error"]["code"]
        == "amount_exceeds_unspent"
    )
    events()  # seen again: final, moved once
    assert balances(envelope_id)["charged_back"] == 20 * DOLLAR


def test_a_chargeback_larger_than_what_the_charge_has_left_is_exposure_escalated(
    alice: Api, staff_api: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge = fund(alice, 30 * DOLLAR)
    assert debit(staff_api, envelope_id, 20 * DOLLAR).status_code == 201
    # Another envelope of Alice's: its money is never taken for this charge's dispute.
    other_id, _ = fund(alice, 20 * DOLLAR)
    opened = stripe_at_sandbox.open_dispute(charge, reason="fraudulent")
    events()
    assert balances(envelope_id) == {
        "funded": 30 * DOLLAR,
        "debited": 20 * DOLLAR,
        "refunded": 0,
        "reserved": 0,
        "unspent": 0,
        "held": 10 * DOLLAR,
        "charged_back": 0,
    }
    assert balances(other_id)["unspent"] == 20 * DOLLAR
    funds = DisputeFunds.objects.get(provider_dispute_id=opened["id"])
    assert (funds.withdrawn_micro, funds.held_micro, funds.exposure_micro) == (
        30 * DOLLAR,
        10 * DOLLAR,
        20 * DOLLAR,
    )
    escalation = Escalation.objects.get(pk=funds.escalation_id)
    assert escalation.status == "open"
    assert escalation.verdict_class == "dispute exposure"
    assert "$20.00" in escalation.reason
    assert opened["id"] in escalation.reason

    stripe_at_sandbox.set_dispute_status(opened["id"], "lost")
    events()
    assert balances(envelope_id)["charged_back"] == 10 * DOLLAR
    assert balances(other_id)["unspent"] == 20 * DOLLAR


def test_an_inquiry_holds_nothing_and_its_charge_stays_refundable_while_stripe_allows(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge = fund(alice, 30 * DOLLAR)
    opened = stripe_at_sandbox.open_dispute(
        charge, reason="fraudulent", status="warning_needs_response"
    )
    events()
    assert balances(envelope_id)["held"] == 0
    assert balances(envelope_id)["unspent"] == 30 * DOLLAR
    assert not DisputeFunds.objects.filter(provider_dispute_id=opened["id"]).exists()

    # Stripe says `is_charge_refundable`: the buyer's refund goes through.
    done = refund(alice, envelope_id, {"amount_micro": 10 * DOLLAR})
    assert done.status_code == 200, done.content
    assert done.json()["data"]["status"] == "refunded"
    settle_runs()
    events()
    assert balances(envelope_id)["refunded"] == 10 * DOLLAR

    # The inquiry becomes a chargeback: Stripe withdraws the disputed amount; the charge has only
    # $20 left, so $20 is held and $10 (refunded already) is exposure — a refund and a chargeback
    # of the same money never both stand in the ledger.
    stripe_at_sandbox.set_dispute_status(opened["id"], "needs_response")
    events()
    assert balances(envelope_id) == {
        "funded": 30 * DOLLAR,
        "debited": 0,
        "refunded": 10 * DOLLAR,
        "reserved": 0,
        "unspent": 0,
        "held": 20 * DOLLAR,
        "charged_back": 0,
    }
    funds = DisputeFunds.objects.get(provider_dispute_id=opened["id"])
    assert funds.exposure_micro == 10 * DOLLAR


def test_the_disputes_admin_page_shows_the_money_the_dispute_took(
    alice: Api, staff_api: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge = fund(alice, 30 * DOLLAR)
    assert debit(staff_api, envelope_id, 20 * DOLLAR).status_code == 201
    opened = stripe_at_sandbox.open_dispute(charge, reason="fraudulent")
    events()
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    person = staff_api.user
    person.user_permissions.add(Permission.objects.get(codename="view_dispute"))
    client = Client()
    client.force_login(type(person).objects.get(pk=person.pk))
    page = client.get(reverse("admin:disputes_dispute_change", args=[dispute.pk]))
    assert page.status_code == 200
    section = page.content.decode().split('id="dispute-funds"')[1].split("</div>")[0]
    # Held $10.00 (what the charge had left), exposure $20.00 (debited already), fee $15.00.
    for words in ("$30.00", "$10.00", "$20.00", "$15.00", "the platform's unless the dispute"):
        assert words in section, words
