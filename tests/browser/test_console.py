"""The ops console in a real browser at 1366 by 900 (issue 13): an `ops`-group user (the group as
`demo_users_ensure` builds it) signs in, sees non-zero counts on the console from seeded data,
follows each count to its list and finds that many rows, opens an envelope's timeline, visits
every admin list ops works with (none refused), and the envelope, refund and run lists fit the
window without scrolling sideways. Screenshots of each page are kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.urls import reverse
from playwright.sync_api import Browser, Page, expect

from accounts.services import demo_users_ensure
from envelopes.models import Envelope
from tests.drivers.disputes import Ops, World
from tests.ops.console_seed import seed_console

PASSWORD = "pw-console-123"
# The apps whose admin pages are the operations console's (as tests/accounts/test_ops_group.py).
OPS_APPS = {
    "core",
    "envelopes",
    "verification",
    "disputes",
    "receipts",
    "reconciliation",
    "django_celery_beat",
}
WIDE_LISTS = (
    "envelopes_envelope",
    "envelopes_refundoperation",
    "verification_verificationrun",
)


@pytest.fixture
def desk(browser: Browser) -> Any:
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}{reverse('admin:login')}?next={reverse('admin:index')}")
    page.get_by_label("Login").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url(f"{base}{reverse('admin:index')}")


def no_sideways_scroll(page: Page) -> bool:
    """Neither the page nor the list scrolls sideways, and no column is cut off: the last
    column ends before the filter panel (or the window's edge)."""
    return bool(
        page.evaluate(
            """() => {
              const fits = document.documentElement.scrollWidth <= window.innerWidth;
              const cells = document.querySelectorAll('#result_list thead th');
              const last = cells[cells.length - 1].getBoundingClientRect();
              const filter = document.querySelector('#changelist-filter');
              const limit = filter ? filter.getBoundingClientRect().left : window.innerWidth;
              const results = document.querySelector('#changelist .results');
              return fits && last.right <= limit + 1
                && results.scrollWidth <= results.clientWidth;
            }"""
        )
    )


@pytest.mark.django_db(transaction=True)
def test_ops_work_from_the_console_at_1366_pixels(
    desk: Page,
    live_server: Any,
    world: World,
    ops: Ops,
    artifacts: Path,
) -> None:
    seeded = seed_console(world, ops)
    demo_users_ensure(
        users={"olga": {"password": PASSWORD, "email": "olga@example.com", "staff": True}}
    )
    base = live_server.url
    sign_in(desk, base, "olga")

    # The console: every count is there and not zero (the seeding put something in each).
    desk.screenshot(path=str(artifacts / "console-1366.png"), full_page=True)
    tiles = desk.locator("a.vouch-tile")
    assert tiles.count() == 9
    counts: dict[str, tuple[int, str]] = {}
    for i in range(tiles.count()):
        tile = tiles.nth(i)
        key = str(tile.get_attribute("id")).removeprefix("console-")
        counts[key] = (int(str(tile.get_attribute("data-count"))), str(tile.get_attribute("href")))
    assert all(count > 0 for count, _ in counts.values()), counts
    assert counts["disputes"][0] == len(seeded.disputes)
    assert desk.locator("tr.vouch-dispute-due").count() == len(seeded.disputes)
    assert desk.locator("svg.vouch-chart").count() == 2
    assert desk.locator("g.vouch-bar").count() == 30
    assert desk.locator("#vouch-all-lists").is_visible()

    # Each count opens its list, which shows exactly that many rows.
    for key, (count, href) in counts.items():
        desk.goto(f"{base}{reverse('admin:index')}")
        desk.locator(f"#console-{key}").click()
        desk.wait_for_load_state()
        assert desk.url.endswith(href), (key, desk.url)
        rows = desk.locator("#result_list tbody tr")
        assert rows.count() == count, key
        desk.screenshot(path=str(artifacts / f"console-list-{key}.png"))

    # An envelope's timeline, from the envelope list.
    envelope = Envelope.objects.get(pk=seeded.stuck_refund_envelope)
    desk.goto(f"{base}{reverse('admin:envelopes_envelope_changelist')}?q={envelope.public_id}")
    desk.locator("#result_list tbody tr").first.get_by_role("link").first.click()
    timeline = desk.locator("#envelope-timeline tr.vouch-event")
    expect(timeline.first).to_be_visible()
    assert envelope.public_id in desk.content()
    assert timeline.count() >= 5
    kinds = {timeline.nth(i).get_attribute("data-kind") for i in range(timeline.count())}
    assert {"funding", "provider", "journal", "refund"} <= kinds
    desk.screenshot(path=str(artifacts / "console-envelope-timeline.png"), full_page=True)
    # Long ids and idempotency keys in the timeline wrap: the page never scrolls sideways.
    assert desk.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    # Every list ops works with opens (none refused), and the three wide lists fit the window.
    pages = [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
        if model._meta.app_label in OPS_APPS
    ]
    pages.append(reverse("admin:accounts_apitoken_changelist"))
    for url in pages:
        response = desk.goto(f"{base}{url}")
        assert response is not None
        assert response.status == 200, url
    for name in WIDE_LISTS:
        desk.goto(f"{base}{reverse(f'admin:{name}_changelist')}")
        desk.screenshot(path=str(artifacts / f"console-{name}-1366.png"))
        assert desk.locator("#result_list tbody tr").count() > 0, name
        assert no_sideways_scroll(desk), name
