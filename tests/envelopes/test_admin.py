"""The ops admin for envelopes (SPEC §10): the envelope page with its balances, funding legs,
debits, journal, refunds (leg outcomes and verdicts) and the ledger check; read-only for everyone,
superusers included, because money moves only through the services."""

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from envelopes.models import Envelope, FundingLeg, JournalEntry, RefundLeg, RefundOperation
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import VerificationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    return client


@pytest.fixture
def envelope(alice: Api, staff_api: Api, sandbox: SandboxControl) -> Envelope:
    """$10 + $3 + $2, a $1.234567 debit, the $3 charge disputed, then a refund of everything:
    two legs accepted (one of them VERIFIED, one still PENDING) and one refused."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    alice.top_up(envelope_id, 2_000_000)
    debit = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 1_234_567, "reference": "clm_admin_1"},
    )
    assert debit.status_code == 201, debit.content
    disputed = FundingLeg.objects.get(envelope__public_id=envelope_id, sequence=2)
    sandbox.open_dispute(disputed.charge_id, reason="fraudulent")
    refund = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert refund.json()["data"]["status"] == "partially_refunded", refund.content
    newest = RefundLeg.objects.get(funding_leg__sequence=3, funding_leg__envelope=disputed.envelope)
    assert newest.verification_run is not None
    VerificationRun.objects.filter(pk=newest.verification_run.pk).update(verdict="VERIFIED")
    return Envelope.objects.get(public_id=envelope_id)


def _page(client: Client, envelope: Envelope) -> str:
    response = client.get(reverse("admin:envelopes_envelope_change", args=[envelope.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_envelope_page_shows_where_the_money_is(superuser: Client, envelope: Envelope) -> None:
    page = _page(superuser, envelope)
    # Balances, in micro-dollars and in dollars.
    for text in ("15,000,000", "$15.00", "1,234,567", "$1.234567", "10,760,000", "$10.76"):
        assert text in page
    assert "3,005,433" in page
    assert "$3.005433" in page
    # Every funding leg with its charge, PaymentIntent, and what is refunded of it.
    legs = list(envelope.funding_legs.order_by("sequence"))
    assert [leg.refunded_micro for leg in legs] == [8_760_000, 0, 2_000_000]
    assert page.count('class="vouch-funding"') == 3
    for leg in legs:
        assert leg.charge_id
        assert leg.charge_id in page
        assert leg.payment_intent_id
        assert leg.payment_intent_id in page
    assert "8,760,000" in page
    assert "$8.76" in page
    # The debit.
    debit = envelope.debits.get()
    assert page.count('class="vouch-debit"') == 1
    assert debit.public_id in page
    assert "clm_admin_1" in page
    assert "sam" in page


def test_the_envelope_page_shows_every_journal_entry_with_its_deltas(
    superuser: Client, envelope: Envelope
) -> None:
    page = _page(superuser, envelope)
    entries = list(JournalEntry.objects.filter(envelope=envelope).order_by("id"))
    # 3 fund, 1 debit, 3 reserve, 2 accept, 1 release (the refused leg).
    assert [e.kind for e in entries].count("fund") == 3
    assert len(entries) == 10
    assert page.count('class="vouch-journal"') == len(entries)
    for entry in entries:
        link = entry.refund_leg or entry.debit or entry.funding_leg
        assert link is not None
        assert link.public_id in page
    assert "-1,234,567" in page
    assert "-$1.234567" in page
    assert "refused: charge_disputed" in page  # the release entry's note
    # The journal's footer adds up to the stored balances.
    context = _context(superuser, envelope)
    assert [t.micro for t in context["journal_totals"]] == [
        envelope.total_funded_micro,
        envelope.total_debited_micro,
        envelope.total_refunded_micro,
        envelope.reserved_micro,
        envelope.unspent_micro,
        envelope.held_micro,
        envelope.charged_back_micro,
    ]


def _context(client: Client, envelope: Envelope) -> Any:
    return client.get(reverse("admin:envelopes_envelope_change", args=[envelope.pk])).context


def test_the_envelope_page_shows_refund_legs_with_outcomes_and_verdicts(
    superuser: Client, envelope: Envelope
) -> None:
    page = _page(superuser, envelope)
    operation = RefundOperation.objects.get(envelope=envelope)
    assert operation.public_id in page
    assert "partially_refunded" in page
    assert reverse("admin:envelopes_refundoperation_change", args=[operation.pk]) in page
    legs = {leg.funding_leg.sequence: leg for leg in operation.legs.select_related("funding_leg")}
    assert page.count('class="vouch-leg"') == 3
    refused = legs[2]
    assert (refused.outcome, refused.error_code) == ("refused", "charge_disputed")
    assert "charge_disputed" in page
    for sequence in (3, 1):
        leg = legs[sequence]
        run = leg.verification_run
        assert leg.outcome == "accepted"
        assert run is not None
        assert leg.provider_refund_id
        assert leg.provider_refund_id in page
        assert reverse("admin:verification_verificationrun_change", args=[run.pk]) in page
        assert run.public_id in page
    assert "VERIFIED" in page  # the newest leg's run, decided
    assert "PENDING" in page  # the original's run, not yet
    # The link leads to the run's page.
    newest_run = legs[3].verification_run
    assert newest_run is not None
    run_url = reverse("admin:verification_verificationrun_change", args=[newest_run.pk])
    assert superuser.get(run_url).status_code == 200


def test_the_ledger_check_is_clean_and_a_breach_is_shown(
    superuser: Client, envelope: Envelope
) -> None:
    page = _page(superuser, envelope)
    assert '<span class="vouch-badge vouch-good">clean</span>' in page
    assert 'class="vouch-breach"' not in page
    # Move 1 micro from unspent to debited behind the journal's back (the balances still add up,
    # so only the ledger check can tell).
    Envelope.objects.filter(pk=envelope.pk).update(
        total_debited_micro=envelope.total_debited_micro + 1,
        unspent_micro=envelope.unspent_micro - 1,
    )
    page = _page(superuser, envelope)
    assert ">clean<" not in page
    assert "2 breaches" in page
    assert page.count('class="vouch-breach"') == 2
    assert "total_debited_micro" in page
    assert "1,234,568" in page
    assert "unspent_micro" in page
    assert "3,005,432" in page


def test_the_list_shows_balances_in_dollars_and_searches(
    superuser: Client, envelope: Envelope, bob: Api
) -> None:
    url = reverse("admin:envelopes_envelope_changelist")
    page = superuser.get(url).content.decode()
    assert envelope.public_id in page
    assert "alice" in page
    assert "15,000,000" in page
    assert "$15.00" in page
    assert "$3.005433" in page
    bobs = bob.create(2_000_000)["envelope_id"]
    found = superuser.get(url, {"q": envelope.public_id}).content.decode()
    assert envelope.public_id in found
    assert bobs not in found
    found = superuser.get(url, {"q": "bob"}).content.decode()
    assert bobs in found
    assert envelope.public_id not in found


def test_the_refund_operation_page_shows_its_legs(superuser: Client, envelope: Envelope) -> None:
    operation = RefundOperation.objects.get(envelope=envelope)
    listing = superuser.get(reverse("admin:envelopes_refundoperation_changelist")).content.decode()
    assert operation.public_id in listing
    assert "partially_refunded" in listing
    response = superuser.get(reverse("admin:envelopes_refundoperation_change", args=[operation.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="vouch-leg"') == 3
    assert "charge_disputed" in page
    assert "VERIFIED" in page
    assert "5,433" in page  # the remainder
    for leg in operation.legs.exclude(provider_refund_id=""):
        assert leg.provider_refund_id in page


@pytest.mark.parametrize("model", ["envelope", "refundoperation"])
def test_the_admin_is_read_only_even_for_a_superuser(
    superuser: Client, envelope: Envelope, model: str
) -> None:
    obj = envelope if model == "envelope" else RefundOperation.objects.get(envelope=envelope)
    before = Envelope.objects.values().get(pk=envelope.pk)
    change = reverse(f"admin:envelopes_{model}_change", args=[obj.pk])
    assert superuser.get(reverse(f"admin:envelopes_{model}_add")).status_code == 403
    assert superuser.post(reverse(f"admin:envelopes_{model}_add"), {}).status_code == 403
    assert superuser.post(change, {"unspent_micro": 0, "_save": "Save"}).status_code == 403
    delete = reverse(f"admin:envelopes_{model}_delete", args=[obj.pk])
    assert superuser.get(delete).status_code == 403
    assert superuser.post(delete, {"post": "yes"}).status_code == 403
    listing = superuser.get(reverse(f"admin:envelopes_{model}_changelist"))
    assert listing.status_code == 200
    assert reverse(f"admin:envelopes_{model}_add") not in listing.content.decode()
    assert "delete_selected" not in listing.content.decode()
    # Nothing changed.
    assert Envelope.objects.values().get(pk=envelope.pk) == before
    assert RefundOperation.objects.filter(envelope=envelope).count() == 1


def test_staff_need_the_view_permission(envelope: Envelope) -> None:
    user = User.objects.create_user("vera", "vera@example.com", "vera-pw-123", is_staff=True)
    client = Client()
    client.force_login(user)
    url = reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    assert client.get(url).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_envelope"))
    client.force_login(User.objects.get(pk=user.pk))
    response = client.get(url)
    assert response.status_code == 200
    assert envelope.public_id in response.content.decode()
    assert client.post(url, {"_save": "Save"}).status_code == 403
