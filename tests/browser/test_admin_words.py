"""Issue 41 item 5 in a real browser, at 1366 px and 390 px: an escalation's page, a verification
run's page and a discrepancy's page say verdicts, classes, subjects, contracts, channels,
attempts, severities and statuses in a person's words; the codes are only in the quiet details
lines, and nothing sticks out of a phone's window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from playwright.sync_api import Page, expect

from accounts.models import User
from reconciliation.models import Discrepancy
from tests.browser.test_disputes_round_two import phone_overflow
from tests.drivers.reconciliation import a_run
from tests.reconciliation.test_admin_discrepancy import record
from tests.verification.test_admin import make_run
from verification.models import Attempt, Escalation, Observation, Trigger, Verdict, VerificationRun

PASSWORD = "pw-words-123"
CODES = (
    "CONTRADICTED",
    "UNVERIFIABLE",
    "PENDING",
    "charge_mismatch",
    "funding_leg",
    "refund_readback",
    "refund_amount_mismatch",
    "stripe.refund.created",
)


def visible_words(page: Page) -> str:
    """What a person reads of the page's content (details lines and JSON left out)."""
    return str(
        page.locator("#content").evaluate(
            "e => { const c = e.cloneNode(true);"
            " c.querySelectorAll('.vouch-quiet, pre, details').forEach(q => q.remove());"
            " return c.innerText; }"
        )
    )


def a_run_to_read() -> VerificationRun:
    run = make_run(
        "erf_words:leg_1",
        verdict=Verdict.CONTRADICTED,
        verdict_class="wrong amount",
        verdict_reason="The provider refunded a different amount.",
    )
    attempt = Attempt.objects.create(
        run=run,
        number=1,
        trigger=Trigger.POLL,
        started_at=run.operation_created_at,
        finished_at=run.operation_created_at,
        verdict=Verdict.CONTRADICTED,
        verdict_class="wrong amount",
        reason="The provider refunded a different amount.",
        conditions=[
            {
                "name": "refund_amount_mismatch",
                "kind": "contradicted",
                "result": "true",
                "actual": 500,
                "expected": 876,
            }
        ],
    )
    Observation.objects.create(
        attempt=attempt,
        channel="refund_readback",
        level="E2",
        verifier="http",
        observed_at=run.operation_created_at,
        data={"id": "re_1", "amount": 500},
        digest="d" * 64,
    )
    run.decided_at = run.operation_created_at
    run.decided_by = attempt
    run.save(update_fields=["decided_at", "decided_by"])
    return run


@pytest.mark.django_db(transaction=True)
def test_three_staff_pages_in_words(page: Page, live_server: Any, artifacts: Path) -> None:
    staff = User.objects.create_user("wendy", "wendy@example.com", PASSWORD, is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(
            codename__in=("view_escalation", "view_verificationrun", "view_discrepancy")
        )
    )
    run = a_run_to_read()
    escalation = Escalation.objects.create(
        subject_type="funding_leg",
        subject_id="fnd_0123456789abcdef01234567",
        money=True,
        verdict=Verdict.UNVERIFIABLE,
        verdict_class="charge_mismatch",
        reason="Stripe shows a different amount for the charge than the funding leg records.",
    )
    discrepancy: Discrepancy = record(
        a_run(),
        code="charge_mismatch",
        subject_type="funding_leg",
        subject_id="fnd_words",
        summary="Stripe's charge is $5.00; the funding leg records $6.00.",
    )
    pages = {
        "escalation": (
            reverse("admin:verification_escalation_change", args=[escalation.pk]),
            ("Could not be verified: charge and funding leg differ", "funding leg"),
        ),
        "run": (
            reverse("admin:verification_verificationrun_change", args=[run.pk]),
            (
                "Contradicted by the provider",
                "Attempt #1 (scheduled check)",
                "Refund readback",
                "Stripe holds the refund for the charge",
            ),
        ),
        "discrepancy": (
            reverse("admin:reconciliation_discrepancy_change", args=[discrepancy.pk]),
            ("Charge and funding leg differ", "Evidence", "Open", "funding leg"),
        ),
    }

    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}{reverse('admin:login')}")
    page.get_by_label("Login").fill("wendy")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    for name, (url, said) in pages.items():
        page.goto(f"{live_server.url}{url}")
        words = visible_words(page)
        for text in said:
            assert text in words, (name, text)
        assert not [code for code in CODES if code in words], (name, words)
        # The codes are still there, as quiet details.
        expect(page.locator(".vouch-quiet").first).to_be_attached()
        page.screenshot(path=str(artifacts / f"admin-words-{name}-1366.png"), full_page=True)
        assert phone_overflow(page) == [], name
        page.set_viewport_size({"width": 390, "height": 844})
        page.reload()
        assert not [code for code in CODES if code in visible_words(page)], name
        page.screenshot(path=str(artifacts / f"admin-words-{name}-390.png"), full_page=True)
        page.set_viewport_size({"width": 1366, "height": 900})
