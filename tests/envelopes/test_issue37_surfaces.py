"""Issue 37: the API, the buyer's pages and the admin show the money a dispute takes (SPEC §18) —
held and charged back, in numbers and in words, with each dispute's funds on the envelope — and a
refund Stripe later fails reads as failed (item 7), never as sent and verified.

Every story runs through the sandbox over HTTP and reads the events it emitted as delivered
webhooks are (`reconciliation.catch_up`)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from accounts.models import User
from envelopes.models import DisputeFunds, RefundLeg
from envelopes.selectors import dispute_funds_of, ledger_breaches
from reconciliation.catch_up import catch_up_run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000


def _text(response: Any) -> str:
    """The page's text, tags dropped and spaces folded (what a reader sees)."""
    page = response.content.decode()
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)).replace(" :", ":"))


def events() -> None:
    catch_up_run()
    assert ledger_breaches() == []


def fund(buyer: Api, amount_micro: int) -> tuple[str, str]:
    data = buyer.create(amount_micro)
    settle_runs()
    return data["envelope_id"], data["funding_legs"][0]["charge"]


def chargeback(buyer: Api, sandbox: SandboxControl, amount_micro: int) -> tuple[str, str, str]:
    envelope_id, charge = fund(buyer, amount_micro)
    opened = sandbox.open_dispute(charge, reason="fraudulent")
    events()
    return envelope_id, charge, opened["id"]


# --- item 7: a refund Stripe later fails -----------------------------------------------------


def _refund_failed_later(alice: Api, sandbox: SandboxControl) -> tuple[str, str]:
    envelope_id, _ = fund(alice, 1 * DOLLAR)
    done = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert done.status_code == 200, done.content
    refund_id = done.json()["data"]["refund_id"]
    settle_runs()
    leg = RefundLeg.objects.select_related("verification_run").get()
    assert leg.verification_run is not None
    assert leg.verification_run.verdict == "VERIFIED"
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "expired_or_canceled_card")
    events()  # refund.failed: the money goes back to the envelope, once
    leg.refresh_from_db()
    assert leg.released
    return envelope_id, refund_id


def test_a_refund_stripe_fails_later_reads_as_failed_in_the_api(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, refund_id = _refund_failed_later(alice, stripe_at_sandbox)
    data = alice.get(f"/api/v1/escrow/refunds/{refund_id}").json()["data"]
    assert (data["refunded_micro"], data["failed_micro"]) == (0, 1 * DOLLAR)
    assert data["status"] == "failed"
    assert data["verification_status"] == "attention"
    assert data["balances"]["unspent_micro"] == 1 * DOLLAR
    envelope = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]
    assert [r["status"] for r in envelope["refunds"]] == ["failed"]


def test_a_refund_stripe_fails_later_reads_as_failed_on_the_buyers_page(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, refund_id = _refund_failed_later(alice, stripe_at_sandbox)
    page = alice.client.get(f"/escrow/envelopes/{envelope_id}/")
    assert page.status_code == 200
    text = _text(page)
    assert "sent to the cards" not in text.split(f"Refund {refund_id}:")[1].split("Asked")[0]
    assert (
        f"Refund {refund_id}: failed later: Stripe accepted it, then reported it failed; "
        "the money is back in your envelope"
    ) in text
    assert 'data-refund-status="failed"' in page.content.decode()
    assert "Sent to the cards $0.00 Back in the envelope $1.00" in text


# --- held and charged back --------------------------------------------------------------------


def test_the_api_shows_held_money_and_the_disputes_funds(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge, dispute_id = chargeback(alice, stripe_at_sandbox, 20 * DOLLAR)
    data = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]
    assert (data["held_micro"], data["held_usd"]) == (20 * DOLLAR, 20.0)
    assert (data["charged_back_micro"], data["charged_back_usd"]) == (0, 0.0)
    assert data["unspent_micro"] == 0
    assert data["funding_legs"][0]["held_micro"] == 20 * DOLLAR
    assert data["funding_legs"][0]["charged_back_micro"] == 0
    [funds] = data["disputes"]
    assert funds == {
        "dispute": dispute_id,
        "charge": charge,
        "status": "held",
        "held_micro": 20 * DOLLAR,
        "held_usd": 20.0,
        "charged_back_micro": 0,
        "charged_back_usd": 0.0,
        "updated_at": funds["updated_at"],
    }
    listed = alice.get("/api/v1/escrow/envelopes").json()["data"]["results"]
    assert (listed[0]["held_micro"], listed[0]["charged_back_micro"]) == (20 * DOLLAR, 0)
    assert "disputes" not in listed[0]

    stripe_at_sandbox.set_dispute_status(dispute_id, "lost")
    events()
    data = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]
    assert (data["held_micro"], data["charged_back_micro"]) == (0, 20 * DOLLAR)
    assert data["disputes"][0]["status"] == "charged_back"
    assert data["disputes"][0]["charged_back_micro"] == 20 * DOLLAR


def test_the_envelope_schema_documents_held_charged_back_and_disputes() -> None:
    components = Client().get("/api/v1/schema/", {"format": "json"}).json()["components"]
    schemas = components["schemas"]
    for name in ("EnvelopeOut", "EnvelopeListItemOut", "BalancesOut"):
        properties = schemas[name]["properties"]
        for field in ("held_micro", "held_usd", "charged_back_micro", "charged_back_usd"):
            assert field in properties, (name, field)
    assert "disputes" in schemas["EnvelopeOut"]["properties"]
    funds = schemas["EnvelopeDisputeFundsOut"]["properties"]
    assert "exposure_micro" not in funds
    assert {"dispute", "charge", "status", "held_micro", "charged_back_micro"} <= set(funds)


def test_the_buyers_pages_say_held_and_charged_back_in_words(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, _, dispute_id = chargeback(alice, stripe_at_sandbox, 20 * DOLLAR)
    detail = _text(alice.client.get(f"/escrow/envelopes/{envelope_id}/"))
    assert "$20.00 held: your bank is reviewing a dispute on this payment" in detail
    listed = _text(alice.client.get("/escrow/envelopes/"))
    assert "$20.00 held" in listed

    # The refund form says why the held money cannot be refunded.
    form = _text(alice.client.get(f"/escrow/envelopes/{envelope_id}/refund/"))
    assert (
        "$20.00 held: your bank is reviewing a dispute on this payment. Held money cannot be "
        "refunded"
    ) in form

    stripe_at_sandbox.set_dispute_status(dispute_id, "lost")
    events()
    detail = _text(alice.client.get(f"/escrow/envelopes/{envelope_id}/"))
    assert "$20.00 charged back: your bank returned it to you after a dispute" in detail
    assert "held: your bank is reviewing" not in detail


def test_a_refund_preview_and_refusal_say_why_held_money_is_not_refunded(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, _ = fund(alice, 10 * DOLLAR)
    top_up = alice.top_up(envelope_id, 20 * DOLLAR)
    settle_runs()
    charge = next(leg["charge"] for leg in top_up["funding_legs"] if leg["kind"] == "top_up")
    stripe_at_sandbox.open_dispute(charge, reason="fraudulent")
    events()
    page = alice.client.get(f"/escrow/envelopes/{envelope_id}/refund/")
    key = re.search(r'name="key" value="([^"]+)"', page.content.decode()).group(1)

    def preview(**form: str) -> Any:
        return alice.client.post(
            f"/escrow/envelopes/{envelope_id}/refund/",
            {"csrfmiddlewaretoken": alice.csrf, "key": key, "step": "preview", **form},
        )

    everything = preview(choice="everything")
    assert everything.status_code == 200
    text = _text(everything)
    assert "Total refunded $10.00" in text
    assert (
        "$20.00 held: your bank is reviewing a dispute on this payment. Held money cannot be "
        "refunded"
    ) in text

    refused = preview(choice="amount", amount="15.00")
    assert refused.status_code == 422
    text = _text(refused)
    assert "more than the envelope's unspent balance ($10.00)" in text
    assert "$20.00 is held: your bank is reviewing a dispute on this payment" in text

    # The API's preview (what the MCP refund request shows) says it too.
    from envelopes.models import Envelope
    from envelopes.selectors import refund_preview

    shown = refund_preview(envelope=Envelope.objects.get(public_id=envelope_id), amount_micro=None)
    assert (shown["held_micro"], shown["held_usd"]) == (20 * DOLLAR, 20.0)
    assert shown["held_note"].startswith("$20.00 held: your bank is reviewing a dispute")


# --- the admin --------------------------------------------------------------------------------


def _staff(*codenames: str) -> Client:
    user = User.objects.create_user("olga", "olga@example.com", "pw-olga-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_shows_held_and_charged_back_and_each_disputes_funds(
    alice: Api, staff_api: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id, charge = fund(alice, 30 * DOLLAR)
    spent = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 20 * DOLLAR, "reference": "job-42"},
    )
    assert spent.status_code == 201
    dispute_id = stripe_at_sandbox.open_dispute(charge, reason="fraudulent")["id"]
    events()
    funds = dispute_funds_of(dispute_id)
    assert funds is not None
    assert (funds.held_micro, funds.exposure_micro) == (10 * DOLLAR, 20 * DOLLAR)
    assert dispute_funds_of("dp_missing") is None

    olga = _staff("view_envelope", "view_disputefunds")
    envelope_pk = funds.envelope_id
    change = _text(olga.get(f"/admin/envelopes/envelope/{envelope_pk}/change/"))
    assert "Held by dispute" in change
    assert "$10.00" in change
    assert "Charged back" in change

    listing = olga.get("/admin/envelopes/disputefunds/")
    assert listing.status_code == 200
    text = _text(listing)
    for shown in (dispute_id, charge, envelope_id, "$30.00", "$10.00", "$20.00"):
        assert shown in text, shown
    page = olga.get(f"/admin/envelopes/disputefunds/{funds.pk}/change/")
    assert page.status_code == 200
    text = _text(page)
    assert "hold" in text
    assert funds.last_read is not None
    assert funds.last_read.public_id in text
    assert f"/admin/verification/escalation/{funds.escalation_id}/" in page.content.decode()
    # Read only: nothing to add, change or delete, even for a superuser's permissions.
    assert olga.get("/admin/envelopes/disputefunds/add/").status_code == 403
    assert olga.post(f"/admin/envelopes/disputefunds/{funds.pk}/change/", {}).status_code == 403

    nobody = Client()
    nobody.force_login(
        User.objects.create_user("pat", "pat@example.com", "pw-pat-1234", is_staff=True)
    )
    assert nobody.get("/admin/envelopes/disputefunds/").status_code == 403
    assert DisputeFunds.objects.count() == 1
