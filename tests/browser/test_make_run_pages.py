"""The pages of issue 27 on `make run` as the README has a new user meet them (embedded
configuration: SQLite, kombu's filesystem broker, a Celery worker and beat, the sandbox): the demo
buyer funds an envelope through the API (funding stays API-only), signs in at /accounts/login/ in
Chromium and lands on their envelopes, refunds part through the form and sees Stripe's answer and
then the verification's; the demo `ops` signs in, lands on the console, pastes the envelope's id
and the refund's Stripe id into its search box and lands on the envelope's page each time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.test_smoke_run import make_run

BUYER = ("buyer", "vouch-buyer-demo")  # made by run_local (config/settings/local.py)
OPS = ("ops", "vouch-ops-demo")


@pytest.fixture
def window(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        yield context.new_page()
    finally:
        context.close()


def sign_in(page: Page, base: str, who: tuple[str, str]) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Login").fill(who[0])
    page.get_by_label("Password").fill(who[1])
    page.get_by_role("button", name="Sign In").click()


def test_the_buyer_pages_and_the_search_on_make_run(
    window: Page, browser: Browser, tmp_path: Path, artifacts: Path
) -> None:
    with make_run(tmp_path / "var", noreload=True) as run:
        base = run.base
        # Signing in lands the buyer on their envelopes; there are none yet.
        sign_in(window, base, BUYER)
        window.wait_for_url(f"{base}/escrow/envelopes/")
        expect(window.get_by_role("heading", name="Your envelopes")).to_be_visible()

        # Funding is API-only: the README's first step, with this session's cookie and CSRF.
        csrf = next(c["value"] for c in window.context.cookies() if c["name"] == "csrftoken")
        created = window.request.post(
            f"{base}/api/v1/escrow/envelopes",
            data={"amount_micro": 20_000_000, "payment_method": "pm_card_visa"},
            headers={"X-CSRFToken": csrf, "Idempotency-Key": "make-run-pages-1"},
        )
        assert created.status == 201, created.text()
        envelope_id = created.json()["data"]["envelope_id"]

        window.reload()
        row = window.locator(f'tr[data-envelope="{envelope_id}"]')
        expect(row).to_contain_text("$20.00")
        row.get_by_role("link").click()
        window.get_by_role("link", name="Refund unspent money").click()
        window.get_by_label("Part of it").check()
        window.get_by_label("Amount in dollars").fill("12")
        window.get_by_role("button", name="Preview the refund").click()
        expect(window.locator("#preview-total")).to_have_text("$12.00")
        window.get_by_role("button", name="Refund $12.00").click()
        expect(window.locator(".messagelist")).to_contain_text("Refund of $12.00 sent")
        expect(window.locator('[data-balance="unspent"]')).to_have_text("$8.00")
        # The worker's verification reads the refund back: the leg turns "confirmed by Stripe".
        for _ in range(60):
            window.reload()
            if window.locator('[data-leg-state="confirmed"]').count():
                break
            window.wait_for_timeout(1000)
        expect(window.locator('[data-leg-state="confirmed"]')).to_have_count(1)
        refund_text = window.locator(".vouch-refund").first.inner_text()
        refund_id = re.search(r"\bre_[A-Za-z0-9]+", refund_text)
        assert refund_id is not None, refund_text
        window.screenshot(path=str(artifacts / "make-run-buyer-envelope.png"), full_page=True)

        # Staff land on the console; its box takes the envelope's id and Stripe's refund id.
        staff = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
        sign_in(staff, base, OPS)
        staff.wait_for_url(f"{base}/admin/")
        # The envelope's id opens the envelope; Stripe's refund id, the refund that carries it
        # (the refund leg first among the objects that carry it: its run, its receipt, ...).
        box = staff.get_by_label("Search by any id or e-mail")
        box.fill(envelope_id)
        box.press("Enter")
        staff.wait_for_url(re.compile(r"/admin/envelopes/envelope/\d+/change/"))
        expect(staff.locator("#content")).to_contain_text(envelope_id)
        staff.goto(f"{base}/admin/")
        box.fill(refund_id.group(0))
        box.press("Enter")
        staff.wait_for_load_state()
        if "/admin/search/" in staff.url:  # several objects carry it: the refund leg among them
            staff.locator(
                '#search-results li[data-model="envelopes.refundoperation"] a'
            ).first.click()
        staff.wait_for_url(re.compile(r"/admin/envelopes/refundoperation/\d+/change/"))
        expect(staff.locator("#content")).to_contain_text(refund_id.group(0))
        expect(staff.locator("#content")).to_contain_text(envelope_id)
        staff.screenshot(path=str(artifacts / "make-run-ops-search.png"), full_page=True)
        staff.context.close()
    assert "database is locked" not in run.log()
