"""Issue 37 (SPEC §18) in a real browser: the buyer's pages with money a dispute holds, then
charges back, say so in words, pass axe-core and fit at 1366 px and at 390 px (nothing scrolls
sideways, the new "Disputes" column included)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from envelopes.selectors import ledger_breaches
from reconciliation.catch_up import catch_up_run
from stripe_sandbox.client import SandboxControl
from tests.browser.test_buyer_pages import check, sign_in
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

HELD = "$20.00 held: your bank is reviewing a dispute on this payment"
CHARGED_BACK = "$20.00 charged back: your bank returned it to you after a dispute"


@pytest.fixture
def window(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        yield context.new_page()
    finally:
        context.close()


def test_held_then_charged_back_money_is_said_in_words_and_fits(
    window: Page,
    phone: Page,
    live_server: Any,
    alice: Api,
    stripe_at_sandbox: SandboxControl,
    artifacts: Path,
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    top_up = alice.top_up(envelope_id, 20_000_000)
    settle_runs()
    charge = next(leg["charge"] for leg in top_up["funding_legs"] if leg["kind"] == "top_up")
    dispute_id = stripe_at_sandbox.open_dispute(charge, reason="fraudulent")["id"]
    catch_up_run()
    assert ledger_breaches() == []
    base = live_server.url

    for page in (window, phone):
        sign_in(page, base, "alice")
        page.wait_for_url(f"{base}/escrow/envelopes/")
        expect(page.locator(f'tr[data-envelope="{envelope_id}"] [data-disputes]')).to_contain_text(
            "$20.00 held"
        )
        check(page, artifacts, "37-envelopes-held")
        page.goto(f"{base}/escrow/envelopes/{envelope_id}/")
        expect(page.locator('[data-balance="held"]')).to_contain_text(HELD)
        expect(page.locator("[data-disputed]")).to_contain_text(HELD)
        check(page, artifacts, "37-envelope-held")
        page.goto(f"{base}/escrow/envelopes/{envelope_id}/refund/")
        expect(page.locator("#held")).to_contain_text("Held money cannot be refunded")
        page.get_by_role("button", name="Preview the refund").click()
        expect(page.locator("#preview-total")).to_have_text("$10.00")
        check(page, artifacts, "37-refund-preview-held")

    stripe_at_sandbox.set_dispute_status(dispute_id, "lost")
    catch_up_run()
    for page in (window, phone):
        page.goto(f"{base}/escrow/envelopes/{envelope_id}/")
        expect(page.locator('[data-balance="charged_back"]')).to_contain_text(CHARGED_BACK)
        expect(page.locator('[data-balance="held"]')).to_have_count(0)
        check(page, artifacts, "37-envelope-charged-back")
