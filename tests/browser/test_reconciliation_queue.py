"""A money discrepancy worked in a real browser (SPEC §15.4, §15.5): someone refunded a Vouch
charge at the provider, outside Vouch (no metadata); reconciliation finds it as `refund_foreign`
on the funding leg. Ops opens the queue, opens the discrepancy, sees both sides with the differing
fields marked, and proposes *record a foreign refund*; the proposer cannot approve; a second
person confirms the amount on the adjustment page and approves. The discrepancy is resolved as
adjusted, the money moved unspent → refunded, and the ledger holds. Screenshots of each step are
kept."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import stripe
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import User
from envelopes.models import Adjustment, Envelope, FundingLeg
from envelopes.selectors import ledger_breaches
from reconciliation.models import Discrepancy, Observation
from reconciliation.services import Finding, discrepancy_record
from tests.drivers.api import Api
from tests.drivers.reconciliation import a_run

PASSWORD = "pw-browser-123"


def person(username: str, *perms: tuple[str, str]) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=True)
    for app, codename in (
        ("reconciliation", "view_discrepancy"),
        ("reconciliation", "view_adjustment"),
        *perms,
    ):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return user


def log_in(page: Page, base: str, username: str, next_url: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{base}{reverse('admin:login')}?next={next_url}")
    # /admin/login/ sends to allauth's form (accounts/views.py).
    page.get_by_label("Login").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()


@pytest.mark.django_db(transaction=True)
def test_a_foreign_refund_is_recorded_under_four_eyes_from_the_queue(
    page: Page,
    live_server: Any,
    alice: Api,
    sdk: stripe.StripeClient,
    artifacts: Path,
) -> None:
    person(
        "pia",
        ("reconciliation", "work_discrepancy"),
        ("envelopes", "add_adjustment"),
    )
    person("aron", ("reconciliation", "approve_adjustment"))
    envelope_id = alice.create(5_000_000)["envelope_id"]
    funding = FundingLeg.objects.get()
    # Refunded in the Stripe Dashboard, say: no Vouch metadata.
    refund = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 150})
    run = a_run()
    listing = {"object": "list", "data": [refund.to_dict()], "has_more": False}
    observation = Observation.objects.create(
        run=run,
        kind="refunds",
        request={"path": "/v1/refunds", "params": {"limit": 100}},
        data=listing,
        sha256=hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest(),
        observed_at=timezone.now(),
    )
    discrepancy, _ = discrepancy_record(
        run=run,
        finding=Finding(
            code="refund_foreign",
            subject_type="refund",
            subject_id=refund.id,
            summary=f"Refund {refund.id} of 150 cents on {funding.charge_id} names no leg.",
            vouch_side={"charge": funding.charge_id, "refund": None, "refunded_micro": 0},
            provider_side={
                "charge": funding.charge_id,
                "refund": refund.id,
                "refunded_micro": 1_500_000,
                "metadata": {},
            },
            differing=["refund", "refunded_micro"],
            charge_id=funding.charge_id,
            envelope_public_id=envelope_id,
            amount_micro=1_500_000,
            observation=observation,
            escalate_as=("funding_leg", funding.public_id),
        ),
    )
    discrepancy_record(  # a hygiene one, older, that queues after the money
        run=run,
        finding=Finding(
            code="leg_stuck", subject_type="refund_leg", subject_id="rfl_old", summary="stuck"
        ),
    )
    shots = iter(range(1, 100))

    def shot(name: str) -> None:
        page.screenshot(
            path=str(artifacts / f"reconciliation-{next(shots):02d}-{name}.png"), full_page=True
        )

    log_in(page, live_server.url, "pia", reverse("admin:reconciliation_discrepancy_changelist"))
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("refund_foreign")  # money first
    expect(rows.first).to_contain_text("$1.50")
    expect(rows.first).to_contain_text("23 h")
    expect(page.locator("#overdue-count")).to_contain_text("No discrepancy is overdue")
    shot("queue")

    rows.first.get_by_role("link", name="refund_foreign").click()
    expect(page.locator("#discrepancy-summary h2")).to_contain_text(discrepancy.public_id)
    differs = page.locator("tr.vouch-differs")
    expect(differs).to_have_count(2)
    expect(page.locator('tr.vouch-differs[data-field="refund"]')).to_contain_text("≠ differs")
    expect(page.locator('tr[data-field="charge"]')).not_to_have_class("vouch-differs")
    expect(page.locator("#discrepancy-observations")).to_contain_text(observation.sha256)
    expect(page.locator("#accept-form")).to_have_count(0)  # money: never accepted with a note
    expect(page.get_by_label("Provider object")).to_have_value(refund.id)
    page.get_by_label("Correction").select_option("foreign_refund")
    page.get_by_label("Reason").fill("Refunded in the Dashboard by support; recording it.")
    shot("discrepancy")
    page.get_by_role("button", name="Propose").click()
    expect(page.locator(".messagelist")).to_contain_text("is proposed")
    expect(page.get_by_role("button", name="Approve and write")).to_have_count(0)
    expect(page.locator(".vouch-note")).to_contain_text("You proposed this adjustment")
    shot("proposed")
    adjustment_url = page.url
    adjustment = Adjustment.objects.get()
    assert (adjustment.kind, adjustment.amount_micro) == ("foreign_refund", 1_500_000)
    envelope = Envelope.objects.get()
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (0, 5_000_000)

    log_in(page, live_server.url, "aron", adjustment_url)
    page.get_by_label("Amount you confirm (dollars)").fill("1.50")
    page.get_by_role("button", name="Approve and write").click()
    expect(page.locator(".messagelist")).to_contain_text("approved and written to the journal")
    shot("approved")

    page.goto(
        live_server.url + reverse("admin:reconciliation_discrepancy_change", args=[discrepancy.pk])
    )
    expect(page.locator("#discrepancy-summary h2")).to_contain_text(
        "Resolved: corrected by an approved adjustment"
    )
    expect(page.locator("#discrepancy-actions")).to_have_count(0)
    shot("resolved")

    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "adjusted")
    assert discrepancy.resolved_by == User.objects.get(username="aron")
    envelope = Envelope.objects.get()
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (1_500_000, 3_500_000)
    assert FundingLeg.objects.get().refunded_micro == 1_500_000
    assert ledger_breaches() == []
    assert Discrepancy.objects.filter(status="open").count() == 1  # the hygiene one
