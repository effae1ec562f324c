"""An adjustment under four eyes in a real browser (issue 10, item 5): ops opens the money
escalation of a refund leg the provider never made, proposes releasing it, and cannot approve
their own proposal; a second person confirms the amount and approves; the escalation is resolved
as adjusted and the money is back. Screenshots of each step are kept."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import User
from envelopes import services
from envelopes.models import Envelope, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation

PASSWORD = "pw-browser-123"


def person(username: str, *perms: tuple[str, str]) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=True)
    for app, codename in (
        ("verification", "view_escalation"),
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
def test_one_proposes_another_approves_in_the_browser(
    page: Page, live_server: Any, alice: Api, sandbox: SandboxControl, artifacts: Path
) -> None:
    person("pia", ("envelopes", "add_adjustment"))
    person("aron", ("reconciliation", "approve_adjustment"))
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    # A day later: the key has expired at the provider and the lookup finds nothing.
    RefundLeg.objects.update(reserved_at=timezone.now() - timedelta(hours=25))
    services.stranded_resume(older_than_s=60)
    escalation = Escalation.objects.get()
    shots = iter(range(1, 100))

    def shot(name: str) -> None:
        page.screenshot(
            path=str(artifacts / f"adjustment-{next(shots):02d}-{name}.png"), full_page=True
        )

    log_in(
        page,
        live_server.url,
        "pia",
        reverse("admin:verification_escalation_change", args=[escalation.pk]),
    )
    expect(page.locator(".vouch-alarm")).to_contain_text("concerns money")
    shot("escalation")
    page.get_by_role("link", name="Propose an adjustment…").click()
    page.get_by_label("Correction").select_option("leg_release")
    page.get_by_label("Reason").fill("The Dashboard shows no refund on the charge.")
    shot("propose")
    page.get_by_role("button", name="Propose").click()
    expect(page.locator(".messagelist")).to_contain_text("is proposed")
    expect(page.get_by_role("button", name="Approve and write")).to_have_count(0)
    shot("proposed")
    adjustment_url = page.url

    log_in(page, live_server.url, "aron", adjustment_url)
    # The form takes dollars (issue 27): micro-dollars typed there are two million dollars.
    page.get_by_label("Amount you confirm (dollars)").fill("2000000")
    page.get_by_role("button", name="Approve and write").click()
    expect(page.locator(".messagelist")).to_contain_text("adjustment_amount_mismatch")
    expect(page.locator(".messagelist")).to_contain_text("You typed $2,000,000.00; it is $2.00.")
    assert Envelope.objects.get().reserved_micro == 2_000_000  # nothing moved
    page.get_by_label("Amount you confirm (dollars)").fill("$2.00")
    page.get_by_role("button", name="Approve and write").click()
    expect(page.locator(".messagelist")).to_contain_text("approved and written to the journal")
    expect(page.locator("h2").first).to_contain_text("applied")
    shot("approved")

    envelope = Envelope.objects.get()
    assert (envelope.reserved_micro, envelope.unspent_micro) == (0, 5_000_000)
    assert RefundLeg.objects.get().outcome == LegOutcome.VOID
    escalation.refresh_from_db()
    assert (escalation.status, escalation.resolution) == ("resolved", "adjusted")
    assert ledger_breaches() == []

    # On a phone (390 px) the applied adjustment's page, journal table included, fits: a wide
    # table scrolls inside itself instead of widening the page.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("table.vouch-full").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot("applied-390px")
