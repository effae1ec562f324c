"""The confirmation page a host is sent to (issue 39 item 6): the SDK's client declares URL-mode
elicitation, is offered the page, and the person opens that URL in a real browser (Chromium at
1366 and 390 px), signs in, sees the refund and confirms it: one refund. Screenshots are kept."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from envelopes.models import RefundOperation
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import issue_token
from tests.agents.test_elicitation import Host, request_refund
from tests.browser.test_refund_confirm import PASSWORD, fits
from tests.drivers.api import Api


@pytest.fixture(params=[1366, 390], ids=["1366px", "390px"])
def window(browser: Browser, request: Any) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.mark.django_db(transaction=True)
def test_the_person_opens_the_elicited_page_and_confirms(
    window: Page,
    asgi_server: str,
    alice: Api,
    sandbox: SandboxControl,
    artifacts: Path,
    settings: Any,
) -> None:
    """Issue 39 item 6: the URL the host was offered is the owner's confirmation page."""
    settings.MCP_REFUND_REQUEST_RATE = ""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")
    host = Host()
    # Playwright's sync API runs an event loop in this thread: the host's client runs in another.
    with ThreadPoolExecutor(1) as other_thread:
        other_thread.submit(request_refund, asgi_server, token, envelope_id, host).result()
    (offered,) = host.elicited
    width = window.viewport_size["width"] if window.viewport_size else 0

    window.goto(offered.url)
    window.get_by_label("Login").fill("alice")
    window.get_by_label("Password").fill(PASSWORD)
    window.get_by_role("button", name="Sign In").click()
    window.wait_for_url(offered.url)
    expect(window.get_by_role("heading", name="Confirm a refund")).to_be_visible()
    expect(window.locator("#preview-total")).to_have_text("$2.00")
    assert fits(window)
    window.screenshot(path=str(artifacts / f"elicited-page-{width}.png"), full_page=True)
    assert RefundOperation.objects.count() == 0

    window.get_by_role("button", name="Confirm refund of $2.00").click()
    expect(window.locator("[data-status]")).to_have_text("confirmed")
    assert fits(window)
    window.screenshot(path=str(artifacts / f"elicited-page-confirmed-{width}.png"), full_page=True)
    assert RefundOperation.objects.count() == 1
