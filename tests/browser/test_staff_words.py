"""Issue 41 items 5 and 6 in a real browser, at 1366 px and 390 px: the review page speaks a
person's words (no raw posture, code or fraction as the figure: codes stay in "details"); a
dispute lost with nothing filed, then appealed at the sandbox, is counted in no console queue
and its page says why nothing can be done; an incomplete appeal version offers no Approve and
says what is missing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Page, expect

from disputes import services
from disputes.models import Dispute, Packet
from stripe_sandbox.client import SandboxControl
from tests.browser.test_disputes_round_two import log_in, log_out, phone_overflow
from tests.drivers.disputes import Ops, World, approve, contest_ready, file
from tests.helpers import settle_runs

RAW_FRACTION = re.compile(r"0\.\d{6} \(\d+/\d+\)")


def review(packet: Packet) -> str:
    return reverse("admin:disputes_packet_review", args=[packet.pk])


def read_again(dispute: Dispute) -> Dispute:
    services.dispute_on_provider_event(
        event={
            "type": "charge.dispute.updated",
            "data": {"object": {"id": dispute.provider_dispute_id}},
        }
    )
    return Dispute.objects.get(pk=dispute.pk)


def visible_words(page: Page, selector: str) -> str:
    """What a person reads of a part of the page (details lines left out)."""
    return str(
        page.locator(selector).evaluate(
            "e => { const c = e.cloneNode(true);"
            " c.querySelectorAll('.vouch-quiet').forEach(q => q.remove());"
            " return c.innerText; }"
        )
    )


@pytest.mark.django_db(transaction=True)
def test_staff_read_words_and_queues_lead_somewhere(
    page: Page,
    live_server: Any,
    world: World,
    ops: Ops,
    stripe_at_sandbox: SandboxControl,
    artifacts: Path,
) -> None:
    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"staff-words-{name}.png"), full_page=True)

    # 1. A ready contest: its review page in words.
    ready = contest_ready(world, ops)
    page.set_viewport_size({"width": 1366, "height": 900})
    log_in(page, live_server.url, "ada", review(ready))
    expect(page.locator("#posture")).to_have_text("Contest the dispute")
    expect(page.locator("#dispute-reason")).to_have_text("Product not received")
    expect(page.locator("#dispute-provider-status")).to_have_text("Waiting for our response")
    expect(page.locator("#costs-break-even")).to_contain_text(
        re.compile(r"^Contesting pays if you win more than \d+(\.\d)?% of such disputes\.")
    )
    for part in ("#packet-overview", "#packet-posture > p", "#packet-costs"):
        words = visible_words(page, part)
        assert not RAW_FRACTION.search(words), (part, words)
        for code in ("product_not_received", "needs_response", "contest\n", "operator_review"):
            assert code not in words, (part, code)
    shot("01-review-in-words")
    wider = phone_overflow(page)
    assert wider == [], (page.url, " ".join(wider))

    # 2. A filed response lost, the appeal open, an appeal prepared with nothing new: Incomplete,
    #    no Approve, and the page says what is missing.
    filed = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    appealed_id = filed.dispute.provider_dispute_id
    stripe_at_sandbox.set_dispute_status(appealed_id, "lost")
    stripe_at_sandbox.appeal_dispute(appealed_id)
    appeal = services.appeal_prepare(dispute=read_again(filed.dispute), requested_by=ops.preparer)
    assert appeal.status == "incomplete"
    page.goto(f"{live_server.url}{review(appeal)}")
    expect(page.locator("#packet-status")).to_have_text("Incomplete (needs more evidence)")
    expect(page.locator("#act-approve")).to_have_count(0)
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator("#not-approvable")).to_contain_text("What is missing: No evidence")
    shot("02-incomplete-appeal-no-approve")
    wider = phone_overflow(page)
    assert wider == [], (page.url, " ".join(wider))

    # 3. A ready response nobody filed; the bank decides against it; the network opens an
    #    appeal at the sandbox. Nothing can be done: no queue counts it, its page says why.
    unfiled = contest_ready(world, ops)
    stripe_at_sandbox.set_dispute_status(unfiled.dispute.provider_dispute_id, "lost")
    stripe_at_sandbox.appeal_dispute(unfiled.dispute.provider_dispute_id)
    assert read_again(unfiled.dispute).provider_status == "appeal_needs_response"
    page.goto(f"{live_server.url}{reverse('admin:index')}")
    # Awaiting a response: the appealable one (its response filed); not the unfiled one.
    expect(page.locator("#console-disputes")).to_have_attribute("data-count", "2")
    expect(page.locator("#console-packets_approval")).to_have_attribute("data-count", "1")
    section = page.locator("#vouch-disputes-due")
    expect(section).to_contain_text(appealed_id)
    expect(section).not_to_contain_text(unfiled.dispute.provider_dispute_id)
    shot("03-console")
    wider = phone_overflow(page)
    assert wider == [], (page.url, " ".join(wider))
    page.locator("#console-packets_approval").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text(ready.public_id)
    page.goto(f"{live_server.url}{review(unfiled)}")
    expect(page.locator("#stage-note")).to_contain_text("decided without a response from Vouch")
    expect(page.locator("#dispute-provider-status")).to_have_text(
        "Lost; the card network accepts an appeal"
    )
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    shot("04-lost-unfiled-says-why")
    wider = phone_overflow(page)
    assert wider == [], (page.url, " ".join(wider))
    log_out(page)
