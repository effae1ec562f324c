"""SPEC §17 in a real browser: a lost dispute appealed through the console (prepared by one person,
approved by another, filed only once the provider shows the appeal stage, the readback verified),
and a Visa compliance dispute that cannot be approved, so cannot be filed, without the separate
acknowledgement of the network fee; a Visa fraud dispute filed with CE 3.0 from the buyer's earlier
fundings, the readback showing it qualified. Screenshots of each step; the pages also at 390 px."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import stripe
import time_machine
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page, expect

from disputes import services
from disputes.models import Dispute, Packet
from receipts.models import Receipt
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import (
    Ops,
    World,
    admit_file,
    approve,
    contest_ready,
    evidence,
    file,
    pdf,
)
from tests.helpers import settle_runs

PASSWORD = "pw-{}-123"  # as tests/drivers/disputes.py's staff_user sets it


def log_in(page: Page, base: str, username: str, next_url: str) -> None:
    page.goto(f"{base}{reverse('admin:login')}?next={next_url}")
    page.get_by_label("Login").fill(username)
    page.get_by_label("Password").fill(PASSWORD.format(username))
    page.get_by_role("button", name="Sign In").click()


def log_out(page: Page) -> None:
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_text("Thanks for spending some quality time")).to_be_visible()


def review(packet: Packet) -> str:
    return reverse("admin:disputes_packet_review", args=[packet.pk])


def read_dispute(sandbox: SandboxControl, dispute_id: str) -> Any:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


WIDER_THAN_THE_WINDOW = """() => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth)
    .filter(e => !e.parentElement.closest('table.vouch-full'))
    .map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)"""


def phone_overflow(page: Page) -> list[str]:
    """At 390 px, what sticks out of the window (nothing, when the page fits; a wide table
    scrolls inside itself)."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    fits = bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))
    wider = (
        []
        if fits
        else list(page.evaluate(WIDER_THAN_THE_WINDOW))
        or ["the page: " + str(page.evaluate("[document.documentElement.scrollWidth, innerWidth]"))]
    )
    page.set_viewport_size({"width": 1366, "height": 900})
    return wider


@pytest.mark.django_db(transaction=True)
def test_a_lost_dispute_is_appealed_through_the_console(
    page: Page,
    live_server: Any,
    world: World,
    ops: Ops,
    stripe_at_sandbox: SandboxControl,
    artifacts: Path,
    media: Any,
) -> None:
    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"appeal-{name}.png"), full_page=True)

    # The response was filed and verified; the bank decided against it, appeal-eligible.
    response = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    dispute_id = response.dispute.provider_dispute_id
    stripe_at_sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.closed", "data": {"object": {"id": dispute_id}}}
    )
    dispute = Dispute.objects.get(pk=response.dispute_id)
    admit_file(dispute, ops.preparer, "doc:courier", "delivery", pdf("Courier photo at the door"))

    # The preparer opens the filed response and prepares an appeal.
    page.set_viewport_size({"width": 1366, "height": 900})
    log_in(page, live_server.url, "pat", review(response))
    expect(page.locator("#filing-status")).to_have_text("filed (readback verified)")
    expect(page.locator("#dispute-provider-status")).to_have_text("Lost")
    shot("01-filed-response-lost")
    page.get_by_role("button", name="Prepare an appeal").click()
    appeal = dispute.packets.get(kind="appeal")
    expect(page).to_have_url(f"{live_server.url}{review(appeal)}")
    expect(page.locator(".messagelist")).to_contain_text(f"Appeal version {appeal.version}")
    expect(page.locator("#packet-kind")).to_have_text("Appeal")
    expect(page.locator("#packet-status")).to_have_text("Ready for review")
    expect(page.locator("#appeal-new-evidence")).to_have_text("doc:courier")
    # Stripe's shape: the appeal's response nests under `card` (`evidence[appeal][card][…]`).
    expect(page.locator("#handoff-request")).to_contain_text('"card": {')
    expect(page.locator("#handoff-request")).to_contain_text('"reason_for_filing"')
    expect(page.locator("#handoff-request")).to_contain_text('"vouch_appeal_digest"')
    expect(page.locator("#act-approve")).to_contain_text("another person must approve it")
    shot("02-appeal-prepared")
    assert phone_overflow(page) == []
    log_out(page)

    # Another person approves it.
    log_in(page, live_server.url, "ada", review(appeal))
    page.get_by_label(f"I approve this packet with digest {appeal.digest[:16]}…").check()
    page.get_by_role("button", name="Approve").click()
    expect(page.locator("#approval-status")).to_have_text("approved")
    shot("03-appeal-approved")
    log_out(page)

    # The filer files it: refused while the provider does not show the appeal stage (read first,
    # nothing sent), then filed once the network opens the appeal.
    log_in(page, live_server.url, "fil", review(appeal))
    page.get_by_label(f"I file this packet with digest {appeal.digest[:16]}…").check()
    page.get_by_role("button", name="File", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("appeal_stage_closed")
    expect(page.locator(".messagelist")).to_contain_text("nothing was sent")
    expect(page.locator("#filing-status")).to_contain_text("not filed")
    shot("04-appeal-stage-not-open")
    assert read_dispute(stripe_at_sandbox, dispute_id)["evidence"]["appeal"] is None

    stripe_at_sandbox.appeal_dispute(dispute_id)
    page.reload()
    page.get_by_label(f"I file this packet with digest {appeal.digest[:16]}…").check()
    page.get_by_role("button", name="File", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("Sent to the provider with key")
    expect(page.locator("#filing-status")).to_contain_text("awaiting readback")
    shot("05-appeal-sent")

    verdicts = settle_runs()
    filed = Packet.objects.select_related("filing_run").get(pk=appeal.pk)
    assert filed.filing_run is not None
    assert filed.filing_run.contract_id == "stripe.dispute.appeal_filed"
    assert verdicts[filed.filing_run.pk] == "VERIFIED"
    page.reload()
    expect(page.locator("#filing-status")).to_have_text("filed (readback verified)")
    expect(page.locator("#readback-verdict")).to_have_text("VERIFIED")
    shot("06-appeal-filed")
    at_provider = read_dispute(stripe_at_sandbox, dispute_id)
    assert at_provider["status"] == "appeal_under_review"
    assert at_provider["metadata"]["vouch_appeal_digest"] == appeal.digest
    assert appeal.summary in at_provider["evidence"]["appeal"]["card"]["reason_for_filing"]
    assert at_provider["evidence"]["appeal"]["card"]["supporting_files"] == list(
        filed.filing_files.values()
    )
    assert Packet.objects.get(pk=response.pk).status == "filed"


@pytest.mark.django_db(transaction=True)
def test_a_compliance_dispute_cannot_be_filed_without_the_fee_acknowledgement(
    page: Page,
    live_server: Any,
    world: World,
    ops: Ops,
    stripe_at_sandbox: SandboxControl,
    artifacts: Path,
) -> None:
    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"compliance-{name}.png"), full_page=True)

    packet = contest_ready(world, ops, reason="noncompliant")
    page.set_viewport_size({"width": 1366, "height": 900})
    log_in(page, live_server.url, "ada", review(packet))
    expect(page.locator("#compliance-fee")).to_contain_text("$500.00")
    expect(page.locator("#packet-costs")).to_contain_text("Visa compliance fee")
    shot("01-review")
    assert phone_overflow(page) == []

    # Approving without the separate acknowledgement is refused; nothing can be filed.
    page.get_by_label(f"I approve this packet with digest {packet.digest[:16]}…").check()
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".messagelist")).to_contain_text("fee_not_acknowledged")
    expect(page.locator("#approval-status")).to_have_text("not approved")
    shot("02-refused-without-acknowledgement")
    assert Packet.objects.get(pk=packet.pk).approval_status == "not_requested"
    log_out(page)
    log_in(page, live_server.url, "fil", review(packet))
    expect(page.locator("#act-file")).to_have_count(0)
    log_out(page)

    # With it, the approval binds it, and filing sends fee_acknowledged.
    log_in(page, live_server.url, "ada", review(packet))
    page.get_by_label(f"I approve this packet with digest {packet.digest[:16]}…").check()
    page.locator("#acknowledge-fee input").check()
    page.get_by_role("button", name="Approve").click()
    expect(page.locator("#approval-status")).to_have_text("approved")
    shot("03-approved-with-acknowledgement")
    log_out(page)
    log_in(page, live_server.url, "fil", review(packet))
    page.get_by_label(f"I file this packet with digest {packet.digest[:16]}…").check()
    page.get_by_role("button", name="File", exact=True).click()
    expect(page.locator("#filing-status")).to_contain_text("awaiting readback")
    settle_runs()
    page.reload()
    expect(page.locator("#filing-status")).to_have_text("filed (readback verified)")
    shot("04-filed")
    at_provider = read_dispute(stripe_at_sandbox, packet.dispute.provider_dispute_id)
    assert at_provider["evidence"]["enhanced_evidence"]["visa_compliance"]["fee_acknowledged"]
    assert (
        at_provider["evidence_details"]["enhanced_eligibility"]["visa_compliance"]["status"]
        == "fee_acknowledged"
    )


@pytest.mark.django_db(transaction=True)
def test_a_visa_fraud_dispute_is_filed_with_ce3_and_the_readback_shows_it_qualified(
    page: Page,
    live_server: Any,
    world: World,
    ops: Ops,
    stripe_at_sandbox: SandboxControl,
    artifacts: Path,
) -> None:
    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"ce3-{name}.png"), full_page=True)

    priors = [world.fund(), world.fund()]
    # The shared clock moves 200 days on: Vouch's and the sandbox's (in this process).
    target = timezone.now() + timedelta(days=200)
    with time_machine.travel(target, tick=True):
        assert stripe_at_sandbox.call("GET", "clock")["now"] >= target.timestamp() - 5
        world.fund()
        dispute = world.dispute(reason="fraudulent")
        services.evidence_admit(
            dispute=dispute,
            actor=ops.preparer,
            data=evidence("doc:login", "consent", "The buyer logged in and confirmed the payment"),
        )
        packet = dispute.packets.order_by("-version").first()
        assert packet is not None
        receipts = {
            r.provider_object_id: r.id
            for r in Receipt.objects.filter(provider_object_id__in=priors)
        }

        page.set_viewport_size({"width": 1366, "height": 900})
        log_in(page, live_server.url, "ada", review(packet))
        expect(page.locator("#ce3-status")).to_have_text("Qualified")
        rows = page.locator("#ce3-priors tbody tr")
        expect(rows).to_have_count(2)
        for charge, receipt_id in receipts.items():
            row = rows.filter(has_text=charge)
            expect(row).to_contain_text("200")
            expect(row.locator("a.vouch-receipt")).to_have_attribute(
                "href", reverse("admin:receipts_receipt_change", args=[quote(receipt_id)])
            )
        expect(page.locator("#handoff-request")).to_contain_text("visa_compelling_evidence_3")
        shot("01-qualified-priors")
        assert phone_overflow(page) == []
        page.get_by_label(f"I approve this packet with digest {packet.digest[:16]}…").check()
        page.get_by_role("button", name="Approve").click()
        expect(page.locator("#approval-status")).to_have_text("approved")
        log_out(page)

        log_in(page, live_server.url, "fil", review(packet))
        page.get_by_label(f"I file this packet with digest {packet.digest[:16]}…").check()
        page.get_by_role("button", name="File", exact=True).click()
        expect(page.locator("#filing-status")).to_contain_text("awaiting readback")
        verdicts = settle_runs()
        filed = Packet.objects.select_related("filing_run").get(pk=packet.pk)
        assert filed.filing_run is not None
        assert filed.filing_run.contract_id == "stripe.dispute.filed_ce3"
        assert verdicts[filed.filing_run.pk] == "VERIFIED"
        page.reload()
        expect(page.locator("#filing-status")).to_have_text("filed (readback verified)")
        shot("02-filed-readback-qualified")
        at_provider = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)
        eligibility = at_provider["evidence_details"]["enhanced_eligibility"]
        assert eligibility["visa_compelling_evidence_3"]["status"] == "qualified"
