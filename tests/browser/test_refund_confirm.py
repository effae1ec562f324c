"""A buyer confirms a refund request in a real browser (issue 14): the assistant's request (made
through the MCP service) gives a confirm_url; the buyer opens it, signs in through allauth, sees
the refund confirming would make now, confirms, and sees the refund Stripe made. The page fits a
1366-pixel-wide window at each step. Screenshots are kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import RefundRequest
from agents.services import refund_request_create
from envelopes.models import RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

PASSWORD = "pw-alice-123"  # tests/envelopes/conftest.py's alice


@pytest.fixture
def window(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def fits(page: Page) -> bool:
    """Nothing scrolls sideways: neither the page nor any table inside the content column."""
    return bool(
        page.evaluate(
            """() => {
              const content = document.querySelector('#content');
              const tables = [...content.querySelectorAll('table')];
              return document.documentElement.scrollWidth <= window.innerWidth
                && content.scrollWidth <= content.clientWidth
                && tables.every(t => t.getBoundingClientRect().right
                                     <= content.getBoundingClientRect().right + 1);
            }"""
        )
    )


@pytest.mark.django_db(transaction=True)
def test_a_buyer_confirms_a_refund_request_in_the_browser(
    window: Page,
    live_server: Any,
    alice: Api,
    sandbox: SandboxControl,
    artifacts: Path,
    settings: Any,
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    proposed = refund_request_create(
        user=alice.user,
        envelope_id=envelope_id,
        amount_micro=None,
        idempotency_key="browser-1",
        client_id="claude-desktop",
        origin=live_server.url,
    )
    assert proposed["confirm_url"].startswith(live_server.url)

    window.goto(proposed["confirm_url"])
    # Not signed in: allauth's sign-in page, then back to the request.
    window.get_by_label("Login").fill("alice")
    window.get_by_label("Password").fill(PASSWORD)
    window.get_by_role("button", name="Sign In").click()
    window.wait_for_url(proposed["confirm_url"])
    expect(window.get_by_role("heading", name="Confirm a refund")).to_be_visible()
    expect(window.locator("#content")).to_contain_text("the whole unspent balance")
    expect(window.locator("#content")).to_contain_text("claude-desktop")
    expect(window.locator("#preview-total")).to_have_text("$13.00")
    expect(window.locator("[data-status]")).to_have_text("waiting for your confirmation")
    assert fits(window)
    window.screenshot(path=str(artifacts / "refund-confirm-1-request-1366.png"), full_page=True)
    assert RefundOperation.objects.count() == 0  # nothing moved yet

    window.get_by_role("button", name="Confirm refund of $13.00").click()
    expect(window.locator(".messagelist")).to_contain_text("Confirmed")
    expect(window.locator("[data-refund-status]")).to_have_text("Sent to the cards")
    expect(window.locator("[data-status]")).to_have_text("confirmed")
    expect(window.get_by_role("button")).to_have_count(0)
    expect(window.get_by_role("link", name="Back to Vouch")).to_be_visible()
    assert fits(window)
    window.screenshot(path=str(artifacts / "refund-confirm-2-confirmed-1366.png"), full_page=True)

    request = RefundRequest.objects.get()
    assert request.status == RefundRequest.Status.CONFIRMED
    operation = RefundOperation.objects.get()
    assert request.refund == operation
    for leg in operation.legs.all():
        expect(window.locator("#content")).to_contain_text(leg.provider_refund_id)
    assert sandbox.state()["counts"]["refunds"] == 2
    assert ledger_breaches() == []
