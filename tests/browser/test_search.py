"""The console's search box in a real browser (issue 27, item 2): an `ops`-group user pastes each
kind of id into the box on the console and lands on its object — straight away when one object
carries it, by its link in the list when several do; an id of nothing and a shape Vouch does not
know each say so. The console and the results pass axe-core (no serious or critical violation) at
1366 px and at 390 px wide, where neither page scrolls sideways. Screenshots are kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import stripe
from axe_playwright_python.sync_playwright import Axe
from django.contrib.admin.utils import quote
from django.urls import reverse
from playwright.sync_api import Browser, Page, expect

from accounts.services import demo_users_ensure
from tests.drivers.disputes import World
from tests.ops.test_search import Seeded, seed_search

PASSWORD = "pw-search-123"
BOX = "Search by any id or e-mail"


def change(model: str, pk: Any, anchor: str = "") -> str:
    url = reverse(f"admin:{model}_change", args=[quote(pk)])
    return f"{url}#{anchor}" if anchor else url


def sign_in(page: Page, base: str) -> None:
    page.goto(f"{base}{reverse('admin:login')}?next={reverse('admin:index')}")
    page.get_by_label("Login").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url(f"{base}{reverse('admin:index')}")


def paste(page: Page, base: str, term: str) -> None:
    """From the console: the id into the box, Enter."""
    page.goto(f"{base}{reverse('admin:index')}")
    page.get_by_label(BOX).fill(term)
    page.get_by_label(BOX).press("Enter")
    page.wait_for_load_state()


def serious(page: Page) -> list[dict[str, Any]]:
    violations = Axe().run(page).response["violations"]
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


def fits(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def viewport(browser: Browser, width: int, height: int) -> Page:
    return browser.new_context(viewport={"width": width, "height": height}).new_page()


@pytest.mark.django_db(transaction=True)
def test_each_id_kind_pasted_in_the_console_lands_on_its_object(
    browser: Browser,
    live_server: Any,
    world: World,
    sdk: stripe.StripeClient,
    settings: Any,
    artifacts: Path,
) -> None:
    seeded: Seeded = seed_search(world, sdk, settings)
    demo_users_ensure(
        users={"olga": {"password": PASSWORD, "email": "olga@example.com", "staff": True}}
    )
    base = live_server.url
    desk = viewport(browser, 1366, 900)
    sign_in(desk, base)
    envelope, funding, leg = seeded.envelope, seeded.funding, seeded.leg
    operation = leg.operation
    run = leg.verification_run
    assert run is not None
    event = next(e for e in seeded.events if e.payload["data"]["object"]["id"] == funding.charge_id)
    envelope_page = change("envelopes_envelope", envelope.pk)
    # (what is pasted, the link followed on the results page (None: one object, opened at
    # once), where it lands)
    cases: list[tuple[str, str | None, str]] = [
        (envelope.public_id, envelope.public_id, envelope_page),
        (funding.public_id, funding.public_id, change("envelopes_envelope", envelope.pk,
                                                      f"funding-{funding.public_id}")),
        (operation.public_id, None, change("envelopes_refundoperation", operation.pk)),
        (leg.public_id, None, change("envelopes_refundoperation", operation.pk,
                                     f"leg-{leg.public_id}")),
        (run.public_id, None, change("verification_verificationrun", run.pk)),
        (seeded.dispute.public_id, None, change("disputes_dispute", seeded.dispute.pk)),
        (seeded.dispute.provider_dispute_id, seeded.dispute.public_id,
         change("disputes_dispute", seeded.dispute.pk)),
        (funding.charge_id, envelope.public_id, envelope_page),
        (funding.payment_intent_id, envelope.public_id, envelope_page),
        (leg.provider_refund_id, leg.public_id,
         change("envelopes_refundoperation", operation.pk, f"leg-{leg.public_id}")),
        (seeded.foreign_refund, f"#{seeded.escalation.pk}",
         change("verification_escalation", seeded.escalation.pk)),
        (event.event_id, None, change("verification_providerevent", event.pk)),
        (seeded.recon.public_id, None, change("reconciliation_run", seeded.recon.pk)),
        (seeded.foreign.public_id, None, change("reconciliation_discrepancy", seeded.foreign.pk)),
        (seeded.request.public_id, None, change("agents_refundrequest", seeded.request.pk)),
        (seeded.charge_receipt.pk, None, change("receipts_receipt", seeded.charge_receipt.pk)),
        # The buyer's e-mail, in capitals: their envelope and refund request (ops may not open
        # the people list, so the person is not among them).
        (envelope.owner.email.upper(), envelope.public_id, envelope_page),
    ]  # fmt: skip
    for term, follow, lands in cases:
        paste(desk, base, term)
        if follow is not None:
            results = desk.locator("#search-results li")
            assert results.count() > 1, (term, desk.url)
            desk.locator("#search-results a", has_text=follow).click()
            desk.wait_for_load_state()
        assert desk.url == f"{base}{lands}", (term, desk.url)
        expect(desk.locator("#content")).to_be_visible()
        assert "Permission needed" not in desk.title(), term

    # Several objects: the id's own first, each a link to its page; the charge's list.
    paste(desk, base, funding.charge_id)
    hits = desk.locator("#search-results li")
    kinds = {text.split(" ", 1)[0] for text in hits.locator("a").all_inner_texts()}
    assert {"Envelope", "Funding", "Refund", "Dispute", "Receipt", "Verification",
            "Provider", "Discrepancy", "Escalation"} <= kinds  # fmt: skip
    desk.screenshot(path=str(artifacts / "search-charge-1366.png"), full_page=True)
    assert serious(desk) == []
    paste(desk, base, envelope.public_id)
    assert "vouch-own" in str(hits.first.get_attribute("class"))

    # Nothing carries it, or nothing has ids of its shape: each says so, in the page.
    paste(desk, base, "env_000000000000000000000000")
    expect(desk.locator("#search-none")).to_contain_text("env_000000000000000000000000")
    assert serious(desk) == []
    paste(desk, base, "xyz_12345")
    expect(desk.locator("#search-unknown")).to_be_visible()
    desk.screenshot(path=str(artifacts / "search-unknown-1366.png"), full_page=True)
    assert serious(desk) == []

    desk.goto(f"{base}{reverse('admin:index')}")
    assert serious(desk) == []
    desk.context.close()


@pytest.mark.django_db(transaction=True)
def test_the_console_and_its_results_at_390_pixels(
    browser: Browser,
    live_server: Any,
    world: World,
    sdk: stripe.StripeClient,
    settings: Any,
    artifacts: Path,
) -> None:
    seeded = seed_search(world, sdk, settings)
    demo_users_ensure(
        users={"olga": {"password": PASSWORD, "email": "olga@example.com", "staff": True}}
    )
    base = live_server.url
    phone = viewport(browser, 390, 844)
    sign_in(phone, base)
    expect(phone.get_by_label(BOX)).to_be_visible()
    phone.screenshot(path=str(artifacts / "console-390.png"), full_page=True)
    assert fits(phone)
    assert serious(phone) == []

    paste(phone, base, seeded.funding.charge_id)
    expect(phone.locator("#search-results li").first).to_be_visible()
    phone.screenshot(path=str(artifacts / "search-charge-390.png"), full_page=True)
    assert fits(phone)
    assert serious(phone) == []
    # The box and its button are on the screen, not pushed off it.
    box = phone.get_by_label(BOX).bounding_box()
    button = phone.get_by_role("button", name="Search").bounding_box()
    assert box is not None
    assert button is not None
    assert box["x"] >= 0
    assert button["x"] + button["width"] <= 390
    phone.context.close()
