"""The buyer reads words, not codes (issue 41, items 4, 5 and 8), in a real browser at 1366 px and
390 px: `5,00` in the refund form refunds $5.00 (never $500) and `1,000` is refused saying to use
a dot; a leg Stripe refused for a reason Vouch has no words for says so in a sentence, Stripe's
code only in its details; the first top-up reads as the first; the confirmation page of an
assistant's refund shows no verdict enum and no leg ids; revoking an assistant asks first, and
cancelling keeps it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oauth2_provider.models import AccessToken, RefreshToken
from playwright.sync_api import Browser, Page, expect

from agents.services import refund_request_create
from envelopes.models import RefundLeg, RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import client_register, tokens_for
from tests.browser.test_buyer_pages import check, sign_in
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db(transaction=True)

LEG_ID = re.compile(r"\brfl_[0-9a-f]+")


@pytest.fixture(params=[1366, 390], ids=["1366px", "390px"])
def screen(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    width = request.param
    context = browser.new_context(
        viewport={"width": width, "height": 900 if width > 1000 else 844}, is_mobile=width < 1000
    )
    try:
        yield context.new_page()
    finally:
        context.close()


def test_5_comma_00_refunds_five_dollars_and_1_comma_000_is_refused(
    screen: Page, live_server: Any, alice: Api, sandbox: SandboxControl, artifacts: Path
) -> None:
    envelope_id = alice.create(20_000_000)["envelope_id"]
    base = live_server.url
    sign_in(screen, base, "alice", f"/escrow/envelopes/{envelope_id}/refund/")
    screen.wait_for_url(f"{base}/escrow/envelopes/{envelope_id}/refund/")

    screen.get_by_label("Part of it").check()
    screen.get_by_label("Amount in dollars").fill("1,000")
    screen.get_by_role("button", name="Preview the refund").click()
    expect(screen.get_by_role("alert")).to_contain_text("Use a dot for cents")
    expect(screen.get_by_role("alert")).to_contain_text("no thousands separator")
    check(screen, artifacts, "words-1-comma-refused")

    screen.get_by_label("Amount in dollars").fill("5,00")
    screen.get_by_role("button", name="Preview the refund").click()
    expect(screen.locator("#preview-total")).to_have_text("$5.00")
    screen.get_by_role("button", name="Refund $5.00").click()
    expect(screen.locator(".messagelist")).to_contain_text("Refund of $5.00 sent")
    expect(screen.locator('[data-balance="unspent"]')).to_have_text("$15.00")

    assert RefundOperation.objects.get().requested_micro == 5_000_000
    assert ledger_breaches() == []


def test_a_refusal_and_the_first_top_up_read_in_words(
    screen: Page, live_server: Any, alice: Api, sandbox: SandboxControl, artifacts: Path
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)  # the first top-up
    legs = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["funding_legs"]
    original = next(leg["charge"] for leg in legs if leg["sequence"] == 1)
    sandbox.forget(original)  # Stripe no longer knows the charge: `resource_missing`
    refunded = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert refunded.status_code in (200, 202), refunded.content
    assert RefundLeg.objects.filter(outcome="refused", error_code="resource_missing").count() == 1

    base = live_server.url
    sign_in(screen, base, "alice", f"/escrow/envelopes/{envelope_id}/")
    screen.wait_for_url(f"{base}/escrow/envelopes/{envelope_id}/")

    refused = screen.locator('[data-leg-state="refused"]')
    expect(refused).to_have_count(1)
    sentence = refused.locator("[data-state-text]")
    expect(sentence).to_contain_text("Refused by Stripe")
    expect(sentence).to_contain_text("The money is back in your envelope.")
    expect(sentence).not_to_contain_text("resource_missing")
    expect(sentence).not_to_contain_text("Stripe answered")
    details = refused.locator("details")
    expect(details).to_contain_text("resource_missing")
    details.locator("summary").click()
    expect(details).to_contain_text("Stripe's code: resource_missing")

    funding = screen.locator("#funding")
    expect(funding).to_contain_text("top-up #1")
    expect(funding).not_to_contain_text("top-up #2")
    expect(funding).to_contain_text("original payment")
    check(screen, artifacts, "words-2-refused-leg")


def test_the_confirmation_page_shows_no_verdict_enum_and_no_leg_ids(
    screen: Page,
    live_server: Any,
    alice: Api,
    sandbox: SandboxControl,
    artifacts: Path,
    settings: Any,
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    sandbox.readback_lag(60_000)  # Stripe's read-back not in yet: the verdict stays PENDING
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    proposed = refund_request_create(
        user=alice.user,
        envelope_id=envelope_id,
        amount_micro=None,
        idempotency_key="words-1",
        client_id="claude-desktop",
        origin=live_server.url,
    )
    sign_in(screen, live_server.url, "alice", proposed["confirm_url"].split(live_server.url)[1])
    screen.wait_for_url(proposed["confirm_url"])
    content = screen.locator("#content")
    expect(content).to_contain_text("top-up #1")
    expect(content).to_contain_text("original payment")
    expect(content).not_to_contain_text("original charge")
    expect(content).not_to_contain_text("funding charge")
    screen.get_by_role("button", name="Confirm refund of $13.00").click()
    expect(screen.locator(".messagelist")).to_contain_text("Confirmed")

    legs = list(RefundLeg.objects.all())
    assert len(legs) == 2
    prose = content.inner_text()
    assert "PENDING" not in prose
    assert "VERIFIED" not in prose
    for leg in legs:
        assert leg.public_id not in prose
    assert LEG_ID.search(prose) is None
    expect(content).to_contain_text("top-up #1")
    expect(content).to_contain_text("On its way")  # the legs' state in the envelope's words
    check(screen, artifacts, "words-3-confirmation")


def test_revoking_an_assistant_asks_first_and_cancelling_keeps_it(
    screen: Page, live_server: Any, alice: Api, artifacts: Path
) -> None:
    claude = client_register(name="Claude on my laptop")
    tokens_for(claude, alice.user, scope="escrow:read escrow:refund_request")
    base = live_server.url
    sign_in(screen, base, "alice", "/escrow/assistants/")
    screen.wait_for_url(f"{base}/escrow/assistants/")
    row = screen.locator(f'tr[data-client="{claude.client_id}"]')
    expect(row).to_contain_text("See your envelopes")  # the scope in words
    check(screen, artifacts, "words-4-assistants")

    row.get_by_role("button", name="Revoke").click()
    expect(screen.get_by_role("heading", name="Revoke Claude on my laptop?")).to_be_visible()
    check(screen, artifacts, "words-5-revoke-confirm")
    assert AccessToken.objects.filter(application=claude).count() == 1  # asking moved nothing
    screen.get_by_role("link", name="Cancel").click()
    screen.wait_for_url(f"{base}/escrow/assistants/")
    expect(screen.locator(f'tr[data-client="{claude.client_id}"]')).to_be_visible()
    assert AccessToken.objects.filter(application=claude).count() == 1
    assert RefreshToken.objects.filter(application=claude, revoked__isnull=True).count() == 1

    screen.locator(f'tr[data-client="{claude.client_id}"]').get_by_role(
        "button", name="Revoke"
    ).click()
    screen.get_by_role("button", name="Revoke its access").click()
    expect(screen.locator(".messagelist")).to_contain_text("Revoked: Claude on my laptop")
    expect(screen.locator("#no-assistants")).to_be_visible()
    assert AccessToken.objects.filter(application=claude).count() == 0
