"""The buyer's own pages in a real browser (issue 27, item 1): a buyer signs in through allauth and
lands on their envelopes, opens one, refunds part of it and then the rest through the form (the
last-in-first-out preview first), and sees a refused leg explained; a form sent twice refunds once;
another buyer's envelope is a 404. Every page passes axe-core with no serious or critical
violation, nothing scrolls sideways at 1366 px, and each page works at 390 px. Screenshots are
kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from envelopes.models import Envelope, RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import client_register, tokens_for
from tests.browser.test_refund_confirm import fits
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORDS = {"alice": "pw-alice-123", "bob": "pw-bob-123"}  # tests/drivers/api.py


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


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it stands."""
    return [
        {"id": v["id"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in Axe().run(page).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def no_sideways_scroll(page: Page) -> bool:
    return bool(page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"))


def check(page: Page, artifacts: Path, name: str) -> None:
    """The page as it stands: no serious accessibility violation, and it fits its window (at
    1366 px the tables too; at 390 px nothing scrolls sideways). A screenshot is kept."""
    assert serious_violations(page) == [], name
    width = page.viewport_size["width"] if page.viewport_size else 0
    assert fits(page) if width >= 1000 else no_sideways_scroll(page), f"{name} at {width} px"
    page.screenshot(path=str(artifacts / f"buyer-{name}-{width}.png"), full_page=True)


def sign_in(page: Page, base: str, username: str, next_url: str = "") -> None:
    page.goto(f"{base}/accounts/login/" + (f"?next={next_url}" if next_url else ""))
    page.get_by_label("Login").fill(username)
    page.get_by_label("Password").fill(PASSWORDS[username])
    page.get_by_role("button", name="Sign In").click()


def test_a_buyer_refunds_part_and_then_the_rest_and_sees_a_refusal_explained(
    window: Page,
    phone: Page,
    live_server: Any,
    alice: Api,
    sandbox: SandboxControl,
    artifacts: Path,
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]  # $10.00, the original payment
    alice.top_up(envelope_id, 3_000_000)  # $3.00, top-up #1 (issue 41: numbered from 1)
    legs = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["funding_legs"]
    original = next(leg["charge"] for leg in legs if leg["sequence"] == 1)
    sandbox.open_dispute(original, reason="fraudulent")  # Stripe will refuse to refund it
    base = live_server.url

    # Signing in lands on the envelopes.
    sign_in(window, base, "alice")
    window.wait_for_url(f"{base}/escrow/envelopes/")
    expect(window.get_by_role("heading", name="Your envelopes")).to_be_visible()
    row = window.locator(f'tr[data-envelope="{envelope_id}"]')
    expect(row).to_contain_text("$13.00")
    expect(window.locator("#funding-api-only")).to_contain_text("Stripe.js")
    check(window, artifacts, "1-envelopes")

    # The envelope.
    row.get_by_role("link").click()
    expect(window.get_by_role("heading", name=f"Envelope {envelope_id}")).to_be_visible()
    expect(window.locator('[data-balance="unspent"]')).to_have_text("$13.00")
    expect(window.locator("#funding")).to_contain_text(original)
    expect(window.locator("#no-refunds")).to_be_visible()
    check(window, artifacts, "2-envelope")

    # Part of it: $2.00, in dollars. The preview first: the newest payment, the top-up.
    window.get_by_role("link", name="Refund unspent money").click()
    expect(window.get_by_role("heading", name="Refund unspent money")).to_be_visible()
    check(window, artifacts, "3-refund-form")
    window.get_by_label("Part of it").check()
    window.get_by_label("Amount in dollars").fill("2")
    window.get_by_role("button", name="Preview the refund").click()
    expect(window.locator("#preview-total")).to_have_text("$2.00")
    expect(window.locator("#preview tbody tr")).to_have_count(1)
    expect(window.locator("#preview")).to_contain_text("top-up #1")
    check(window, artifacts, "4-refund-preview")
    assert RefundOperation.objects.count() == 0  # a preview moves nothing
    window.get_by_role("button", name="Refund $2.00").click()
    expect(window.locator(".messagelist")).to_contain_text("Refund of $2.00 sent")
    expect(window.locator('[data-balance="unspent"]')).to_have_text("$11.00")
    expect(window.locator("[data-refund-status]")).to_have_count(1)

    # The rest: everything unspent. $1.00 from the top-up, $10.00 from the disputed original,
    # which Stripe refuses: back in the envelope, and the page says why.
    window.get_by_role("link", name="Refund unspent money").click()
    window.get_by_label("Everything unspent ($11.00)").check()
    window.get_by_role("button", name="Preview the refund").click()
    expect(window.locator("#preview-total")).to_have_text("$11.00")
    expect(window.locator("#preview tbody tr").first).to_contain_text("top-up #1")
    expect(window.locator("#preview tbody tr").last).to_contain_text("original payment")
    window.get_by_role("button", name="Refund $11.00").click()
    expect(window.locator(".messagelist")).to_contain_text(
        "Part of the refund was refused by Stripe: $10.00 is back in your envelope"
    )
    refused = window.locator('[data-leg-state="refused"]')
    expect(refused).to_have_count(1)
    expect(refused).to_contain_text("Refused by Stripe: the payment is disputed")
    expect(refused).to_contain_text("The money is back in your envelope.")
    expect(window.locator('[data-balance="unspent"]')).to_have_text("$10.00")
    expect(window.locator('[data-balance="refunded"]')).to_have_text("$3.00")
    check(window, artifacts, "5-envelope-refunded")

    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (3_000_000, 10_000_000)
    assert RefundOperation.objects.count() == 2
    assert ledger_breaches() == []

    # Each page at 390 px: nothing scrolls sideways, nothing serious for axe.
    sign_in(phone, base, "alice")
    phone.wait_for_url(f"{base}/escrow/envelopes/")
    check(phone, artifacts, "1-envelopes")
    phone.goto(f"{base}/escrow/envelopes/{envelope_id}/")
    expect(phone.locator('[data-leg-state="refused"]')).to_be_visible()
    check(phone, artifacts, "5-envelope-refunded")
    phone.goto(f"{base}/escrow/envelopes/{envelope_id}/refund/")
    check(phone, artifacts, "3-refund-form")
    phone.get_by_label("Part of it").check()
    phone.get_by_label("Amount in dollars").fill("20")  # more than the unspent $10.00
    phone.get_by_role("button", name="Preview the refund").click()
    expect(phone.get_by_role("alert")).to_contain_text("more than the envelope's unspent balance")
    check(phone, artifacts, "6-refund-refused")
    phone.get_by_label("Amount in dollars").fill("1.5")
    phone.get_by_role("button", name="Preview the refund").click()
    expect(phone.locator("#preview-total")).to_have_text("$1.50")
    check(phone, artifacts, "4-refund-preview")
    assert RefundOperation.objects.count() == 2


def test_a_form_sent_twice_refunds_once(
    window: Page, live_server: Any, alice: Api, sandbox: SandboxControl, artifacts: Path
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    base = live_server.url
    sign_in(window, base, "alice", f"/escrow/envelopes/{envelope_id}/refund/")
    window.wait_for_url(f"{base}/escrow/envelopes/{envelope_id}/refund/")
    window.get_by_label("Part of it").check()
    window.get_by_label("Amount in dollars").fill("5")
    window.get_by_role("button", name="Preview the refund").click()
    expect(window.locator("#preview-total")).to_have_text("$5.00")

    # The confirmation sent twice at once (a double click, a flaky network's resend): both
    # requests reach the server; one refunds, the other waits for it or replays it.
    statuses = window.evaluate(
        """async () => {
          const form = document.querySelector('form#confirm');
          const send = () => fetch(form.action || location.href,
                                   {method: 'POST', body: new FormData(form), redirect: 'manual'});
          const answers = await Promise.all([send(), send()]);
          return answers.map(a => a.type);
        }"""
    )
    assert statuses == ["opaqueredirect", "opaqueredirect"]  # both answered with a redirect
    # And once more by hand, from the page: the same form.
    window.get_by_role("button", name="Refund $5.00").click()
    expect(window.locator(".messagelist")).to_contain_text("nothing was refunded twice")
    expect(window.locator("[data-refund-status]")).to_have_count(1)
    expect(window.locator('[data-balance="unspent"]')).to_have_text("$8.00")
    check(window, artifacts, "7-sent-twice")

    assert RefundOperation.objects.count() == 1
    assert RefundOperation.objects.get().requested_micro == 5_000_000
    assert sandbox.state()["counts"]["refunds"] == 2  # $3.00 from the top-up, $2.00 original
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 8_000_000


def test_another_buyers_envelope_is_a_404(
    window: Page, live_server: Any, alice: Api, bob: Api, artifacts: Path
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    base = live_server.url
    sign_in(window, base, "bob")
    window.wait_for_url(f"{base}/escrow/envelopes/")
    expect(window.locator("#no-envelopes")).to_be_visible()
    for path in [f"/escrow/envelopes/{envelope_id}/", f"/escrow/envelopes/{envelope_id}/refund/"]:
        response = window.goto(base + path)
        assert response is not None
        assert response.status == 404
        expect(window.get_by_role("heading", name="Not found")).to_be_visible()
        assert envelope_id not in window.content()
    check(window, artifacts, "8-not-found")
    assert RefundOperation.objects.count() == 0


def test_no_page_asks_for_a_missing_icon(window: Page, live_server: Any, alice: Api) -> None:
    """Every page view used to log a `favicon.ico` 404: the public site and the admin alike."""
    missing: list[str] = []
    window.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    sign_in(window, live_server.url, "alice")
    window.wait_for_url(f"{live_server.url}/escrow/envelopes/")
    window.goto(f"{live_server.url}/admin/login/")
    icon = window.request.get(f"{live_server.url}/favicon.ico")
    assert icon.status == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert missing == []


def test_the_connected_assistants_page_passes_axe_and_fits_at_1366_and_390(
    window: Page, phone: Page, live_server: Any, alice: Api, artifacts: Path
) -> None:
    """SPEC §10.1 names "Connected assistants" among the buyer's pages: reached from their
    envelopes, it lists each assistant with its scopes and a Revoke, passes axe-core and fits."""
    claude = client_register(name="Claude on my laptop, with a rather long name for a phone")
    tokens_for(claude, alice.user, scope="escrow:read escrow:refund_request")
    base = live_server.url
    for page in (window, phone):
        sign_in(page, base, "alice")
        page.wait_for_url(f"{base}/escrow/envelopes/")
        page.get_by_role("link", name="Connected assistants").first.click()
        page.wait_for_url(f"{base}/escrow/assistants/")
        row = page.locator(f'tr[data-client="{claude.client_id}"]')
        expect(row).to_contain_text("escrow:refund_request")
        expect(row.get_by_role("button", name="Revoke")).to_be_visible()
        check(page, artifacts, "7-assistants")
