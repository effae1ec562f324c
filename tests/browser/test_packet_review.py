"""The packet review page in a real browser (SPEC §10): an approver logs in through the admin's
login form and approves a ready packet, confirming its digest; a filer logs in and files it with
the proposed key; once the independent readback decides, the page says `filed (readback
verified)` and nothing more. A screenshot is kept of every step."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from playwright.sync_api import Page, expect

from disputes.models import Packet
from disputes.services import filing_key_proposal
from tests.drivers.disputes import Ops, World, contest_ready
from tests.helpers import settle_runs

PASSWORD = "pw-{}-123"  # as tests/disputes/conftest.py's staff_user sets it


class Steps:
    """Screenshots, numbered in the order they are taken."""

    def __init__(self, page: Page, directory: Path) -> None:
        self.page = page
        self.directory = directory
        self.taken: list[Path] = []

    def shot(self, name: str) -> None:
        path = self.directory / f"packet-review-{len(self.taken) + 1:02d}-{name}.png"
        path.unlink(missing_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)


def log_in(page: Page, base: str, username: str, next_url: str) -> None:
    page.goto(f"{base}{reverse('admin:login')}?next={next_url}")
    # /admin/login/ sends to allauth's form (accounts/views.py).
    page.get_by_label("Login").fill(username)
    page.get_by_label("Password").fill(PASSWORD.format(username))
    page.get_by_role("button", name="Sign In").click()


@pytest.mark.django_db(transaction=True)
def test_an_approver_then_a_filer_take_a_packet_to_filed(
    page: Page, live_server: Any, world: World, ops: Ops, artifacts: Path
) -> None:
    packet = contest_ready(world, ops)
    review = reverse("admin:disputes_packet_review", args=[packet.pk])
    steps = Steps(page, artifacts)

    # The approver, who did not contribute to this version, logs in, finds the dispute in the
    # queue and opens its packet.
    log_in(page, live_server.url, "ada", reverse("admin:disputes_dispute_changelist"))
    row = page.locator("#result_list tbody tr").filter(has_text=packet.dispute.provider_dispute_id)
    expect(row).to_contain_text("Ready for review")
    expect(row).to_contain_text("$10.00")
    steps.shot("approver-queue")
    row.get_by_role("link", name="Review…").click()
    expect(page).to_have_url(f"{live_server.url}{review}")
    expect(page.locator("#posture")).to_have_text("Contest the dispute")
    expect(page.locator("#digest")).to_have_text(packet.digest)
    expect(page.locator("#packet-validation")).to_contain_text("found nothing wrong")
    receipt = page.locator("#packet-citations a.vouch-receipt")
    expect(receipt).to_have_text(packet.receipt_ids[0])
    expect(receipt).to_have_attribute(
        "href", reverse("admin:receipts_receipt_change", args=[quote(packet.receipt_ids[0])])
    )
    expect(page.locator("#act-file")).to_have_count(0)
    steps.shot("approver-reviews")

    # Approve: the confirmation names the digest being approved.
    page.get_by_label(f"I approve this packet with digest {packet.digest[:16]}…").check()
    steps.shot("approver-confirms")
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".messagelist")).to_contain_text(
        f"approved by ada with digest {packet.digest}"
    )
    expect(page.locator("#approval-status")).to_have_text("approved")
    expect(page.locator("#approved-digest")).to_have_text(packet.digest)
    steps.shot("approved")

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_text("Thanks for spending some quality time")).to_be_visible()
    steps.shot("approver-logged-out")

    # The filer logs in and files it with the key the form proposes.
    log_in(page, live_server.url, "fil", review)
    expect(page.locator("#act-approve")).to_have_count(0)  # no permission, no button
    proposed = filing_key_proposal(Packet.objects.get(pk=packet.pk))
    key = page.get_by_label("Idempotency key")
    expect(key).to_have_value(proposed)
    page.get_by_label(f"I file this packet with digest {packet.digest[:16]}…").check()
    steps.shot("filer-confirms")
    page.get_by_role("button", name="File", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text(
        f"Sent to the provider with key {proposed}"
    )
    expect(page.locator("#filing-status")).to_contain_text("awaiting readback")
    expect(page.locator("#readback-verdict")).to_have_text("PENDING")
    steps.shot("sent-awaiting-readback")

    # The readback run decides; the page then says filed, proven by the readback, and no more.
    verdicts = settle_runs()
    filed = Packet.objects.select_related("filing_run").get(pk=packet.pk)
    assert filed.filing_run is not None
    assert verdicts[filed.filing_run.pk] == "VERIFIED"
    page.reload()
    expect(page.locator("#filing-status")).to_have_text("filed (readback verified)")
    expect(page.locator("#readback-verdict")).to_have_text("VERIFIED")
    expect(page.locator("#readback-run")).to_have_text(filed.filing_run.public_id)
    filing = page.locator("#packet-filing").inner_text()
    assert not re.search(r"\b(won|accepted|closed)\b", filing, re.IGNORECASE), filing
    expect(page.locator("#act-file")).to_have_count(0)
    steps.shot("filed-readback-verified")

    assert filed.filing_status == "filed"
    assert filed.filing_key == proposed
    assert [p.name for p in steps.taken] == [
        "packet-review-01-approver-queue.png",
        "packet-review-02-approver-reviews.png",
        "packet-review-03-approver-confirms.png",
        "packet-review-04-approved.png",
        "packet-review-05-approver-logged-out.png",
        "packet-review-06-filer-confirms.png",
        "packet-review-07-sent-awaiting-readback.png",
        "packet-review-08-filed-readback-verified.png",
    ]
    for path in steps.taken:
        assert path.is_file()
        assert path.stat().st_size > 10_000, path
