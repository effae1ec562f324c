"""Evidence in a real browser (issue 13): an ops user opens a dispute's page, reads its timeline,
admits a PDF as delivery evidence through the form, opens the packet version it gave the dispute,
and the evidence link there serves the very file. Screenshots at 1366 by 900."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from playwright.sync_api import Page, expect

from accounts.services import ops_permissions
from disputes.models import Evidence
from tests.drivers.disputes import World, current, pdf, staff_user

from .test_packet_review import log_in


@pytest.mark.django_db(transaction=True)
def test_an_ops_user_admits_a_file_and_opens_it_from_the_review_page(
    page: Page,
    live_server: Any,
    world: World,
    artifacts: Path,
    media: Path,
    tmp_path: Path,
) -> None:
    ops_group, _ = Group.objects.get_or_create(name="ops")
    ops_group.permissions.set(ops_permissions())
    olive = staff_user("olive")
    olive.groups.add(ops_group)

    world.fund()
    dispute = world.dispute(reason="product_not_received")
    dispute_url = reverse("admin:disputes_dispute_change", args=[dispute.pk])
    page.set_viewport_size({"width": 1366, "height": 900})
    shots: list[Path] = []

    def shot(name: str) -> None:
        path = artifacts / f"dispute-evidence-{len(shots) + 1:02d}-{name}.png"
        path.unlink(missing_ok=True)
        page.screenshot(path=str(path), full_page=True)
        shots.append(path)

    log_in(page, live_server.url, "olive", dispute_url)
    expect(page).to_have_url(f"{live_server.url}{dispute_url}")
    timeline = page.locator("#dispute-timeline")
    expect(timeline).to_contain_text("Dispute recorded from the provider")
    expect(timeline).to_contain_text("Packet version 1 prepared: A person decides")
    expect(timeline.locator(f'a[href$="/disputes/{dispute.provider_dispute_id}"]')).to_have_count(1)
    expect(page.locator("#dispute-evidence")).to_contain_text("No evidence is admitted")
    shot("dispute-and-timeline")

    # Admit a PDF as delivery evidence: Vouch computes its SHA-256.
    content = pdf("Proof of delivery, signed for by J. Doe", size=4000)
    document = tmp_path / "signed-pod.pdf"
    document.write_bytes(content)
    form = page.locator("#act-admit-evidence")
    form.get_by_label("Reference").fill("pod:signed")
    form.get_by_label("Kind").select_option("delivery")
    form.get_by_label("Summary").fill("Signed proof of delivery from the courier")
    form.get_by_label("File").set_input_files(str(document))
    shot("evidence-form-filled")
    form.get_by_role("button", name="Admit evidence").click()

    sha256 = hashlib.sha256(content).hexdigest()
    expect(page.locator(".messagelist")).to_contain_text(
        f"Evidence pod:signed is admitted (delivery, sha256 {sha256})"
    )
    row = page.locator("#dispute-evidence tr.vouch-evidence")
    expect(row).to_contain_text(sha256)
    expect(row.locator("a.vouch-evidence-file")).to_have_text("signed-pod.pdf")
    expect(timeline).to_contain_text("Evidence pod:signed admitted")
    expect(timeline).to_contain_text("Packet version 2 prepared: Contest the dispute")
    shot("evidence-admitted")
    # Long references and digests in the timeline wrap: the page never scrolls sideways at 1366 px.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    # The version the admission gave the dispute: its review page links the evidence to the file.
    packet = current(dispute)
    page.locator("#dispute-packets").get_by_role("link", name=packet.public_id).click()
    expect(page).to_have_url(
        f"{live_server.url}{reverse('admin:disputes_packet_review', args=[packet.pk])}"
    )
    expect(page.locator("#posture")).to_have_text("Contest the dispute")
    link = page.locator("#packet-evidence a.vouch-evidence-file")
    expect(link).to_have_text("pod:signed")
    expect(page.locator("#packet-budget")).to_contain_text("within limits")
    expect(page.locator("#packet-budget")).to_contain_text("shipping_documentation")
    shot("review-with-evidence-link")

    href = link.get_attribute("href")
    evidence = Evidence.objects.get(dispute=dispute, ref="pod:signed")
    assert href == reverse("admin:disputes_evidence_file", args=[evidence.pk])
    served = page.request.get(f"{live_server.url}{href}")  # with this session's cookies
    assert served.status == 200
    assert served.headers["content-type"] == "application/pdf"
    assert served.body() == content
    with page.context.expect_page() as opened:
        link.click()
    opened.value.wait_for_load_state()
    assert opened.value.url == f"{live_server.url}{href}"

    assert [p.name for p in shots] == [
        "dispute-evidence-01-dispute-and-timeline.png",
        "dispute-evidence-02-evidence-form-filled.png",
        "dispute-evidence-03-evidence-admitted.png",
        "dispute-evidence-04-review-with-evidence-link.png",
    ]
    for path in shots:
        assert path.is_file()
        assert path.stat().st_size > 10_000, path
