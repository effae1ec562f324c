"""Two layout defects of issue 27 (item 4), in a real browser: a dispute's page ends with its
Close action (it sat mid-page, between the fields and the evidence form), and a receipt's body is
readable whole at 1920 and at 1366 pixels (its canonical text, one long line, was cut off at the
right edge). Screenshots are kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from playwright.sync_api import Browser, Page

from accounts.services import demo_users_ensure
from receipts.models import Receipt
from tests.drivers.disputes import World

PASSWORD = "pw-olga-123"


def signed_in(browser: Browser, base: str, width: int, height: int) -> Page:
    demo_users_ensure(
        users={"olga": {"password": PASSWORD, "email": "olga@example.com", "staff": True}}
    )
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.goto(f"{base}{reverse('admin:login')}?next={reverse('admin:index')}")
    page.get_by_label("Login").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url(f"{base}{reverse('admin:index')}")
    return page


@pytest.mark.django_db(transaction=True)
def test_a_disputes_close_action_ends_its_page(
    browser: Browser, live_server: Any, world: World, artifacts: Path
) -> None:
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    page = signed_in(browser, live_server.url, 1366, 768)
    page.goto(f"{live_server.url}{reverse('admin:disputes_dispute_change', args=[dispute.pk])}")
    page.screenshot(path=str(artifacts / "dispute-close-1366.png"), full_page=True)

    close = page.get_by_role("link", name="Close", exact=True)
    assert close.count() == 1
    # Below everything else the page shows: the fields, the evidence form and the timeline.
    close_top = close.bounding_box()["y"]  # type: ignore[index]
    for section in ("fieldset.module", "#act-admit-evidence", "#dispute-timeline"):
        box = page.locator(section).last.bounding_box()
        assert box is not None, section
        assert close_top >= box["y"] + box["height"], (section, close_top, box)

    close.click()
    page.wait_for_url(f"{live_server.url}{reverse('admin:disputes_dispute_changelist')}*")
    assert page.locator("#result_list tbody tr").count() == 1


def clipped(page: Page, selector: str) -> list[str]:
    """What hides part of the element: itself or an ancestor (up to #content) narrower than what
    it holds, or the element reaching past the window's right edge."""
    return list(
        page.evaluate(
            """(selector) => {
              const element = document.querySelector(selector);
              const found = [];
              if (element.getBoundingClientRect().right > window.innerWidth) found.push('window');
              for (let node = element; node && node.id !== 'content'; node = node.parentElement) {
                if (node.scrollWidth > node.clientWidth + 1) {
                  found.push(`${node.tagName.toLowerCase()}.${node.className}`
                             + ` ${node.scrollWidth}>${node.clientWidth}`);
                }
              }
              if (document.documentElement.scrollWidth > window.innerWidth) found.push('page');
              return found;
            }""",
            selector,
        )
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), [(1920, 1080), (1366, 768)])
def test_a_receipts_body_reads_whole(
    browser: Browser, live_server: Any, world: World, artifacts: Path, width: int, height: int
) -> None:
    world.fund()
    receipt = Receipt.objects.order_by("occurred_at").first()
    assert receipt is not None
    assert len(receipt.canonical) > 400  # one long line, wider than any window
    page = signed_in(browser, live_server.url, width, height)
    page.goto(
        f"{live_server.url}{reverse('admin:receipts_receipt_change', args=[quote(receipt.pk)])}"
    )
    page.screenshot(path=str(artifacts / f"receipt-body-{width}.png"), full_page=True)

    for field in (".field-canonical_text pre", ".field-body_pretty pre"):
        assert clipped(page, field) == [], field
    # Every character is there to read, the canonical text exactly as signed.
    assert page.locator(".field-canonical_text pre").inner_text() == receipt.canonical
