"""The dispute's timeline on its admin page (issue 13): the provider's events, the recording,
evidence admitted, packet versions prepared, edits, approvals, filings and the provider's answers,
readback runs and their verdicts, and reminders — oldest first, each with its time and a link
(review page, run page, receipt page, escalation, Stripe Dashboard)."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
import time_machine
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from disputes import services
from disputes.models import Dispute, Packet
from disputes.reminders import deadline_reminders_send
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, admit_file, current, pdf
from tests.helpers import settle_runs
from verification.models import Escalation, VerificationRun
from verification.services import provider_event_store

from .test_filing import approve, file

pytestmark = pytest.mark.usefixtures("media")


def store_the_webhook(sandbox: SandboxControl, dispute_id: str) -> dict[str, Any]:
    """The sandbox's `charge.dispute.created` for the dispute, stored as the webhook view does."""
    request = urllib.request.Request(  # noqa: S310 - the sandbox's own URL
        f"{sandbox.url}/v1/events?type=charge.dispute.created&limit=100",
        headers={"Authorization": "Bearer sk_test_vouch_tests"},
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310
        events = json.loads(response.read())["data"]
    event = next(e for e in events if e["data"]["object"]["id"] == dispute_id)
    provider_event_store(event=event, raw=json.dumps(event))
    return dict(event)


def timeline_rows(html: str) -> list[dict[str, str]]:
    start = html.index('id="dispute-timeline"')
    body = html[start : html.index("</table>", start)]
    rows = []
    for row in re.findall(r'<tr class="vouch-timeline[^"]*" data-kind="([^"]+)">(.*?)</tr>', body,
                          re.S):  # fmt: skip
        kind, cells = row
        tds = re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)
        rows.append(
            {
                "kind": kind,
                "when": unescape(tds[0]),
                "what": unescape(re.sub(r"<[^>]+>", "", tds[1])).strip(),
                "by": unescape(tds[3]),
                "links": unescape(tds[4]),
            }
        )
    return rows


def test_the_dispute_page_shows_everything_in_time_order_with_links(
    world: World,
    ops: Ops,
    stripe_at_sandbox: SandboxControl,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    charge_id = world.fund()
    # The provider opens the dispute; its webhook is stored, then processed (which records it).
    opened = stripe_at_sandbox.open_dispute(charge_id, reason="product_not_received")
    event = store_the_webhook(stripe_at_sandbox, opened["id"])
    services.dispute_on_provider_event(event=event)
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("Signed for"))
    packet = services.packet_edit(
        packet=current(dispute),
        actor=ops.preparer,
        changes={"summary": current(dispute).summary + " Signed for at the door."},
    )
    approved = approve(packet, ops)
    filed = file(approved, ops)
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    assert dispute.response_deadline is not None
    # A reminder, sent (on the shared clock) before the filing it would have been about.
    Packet.objects.filter(pk=packet.pk).update(filing_status="not_filed")
    with (
        time_machine.travel(dispute.response_deadline - timedelta(hours=72), tick=False),
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert [r.window for r in deadline_reminders_send()] == ["72h"]
    Packet.objects.filter(pk=packet.pk).update(filing_status="filed")

    client = Client()
    client.force_login(ops.approver)
    response = client.get(reverse("admin:disputes_dispute_change", args=[dispute.pk]))
    assert response.status_code == 200
    rows = timeline_rows(response.content.decode())
    whens = [r["when"] for r in rows]
    assert whens == sorted(whens), whens  # oldest first
    assert all(w.endswith("UTC") for w in whens)

    titles = [r["what"] for r in rows]
    run = VerificationRun.objects.get(pk=filed.filing_run.pk)  # type: ignore[union-attr]
    expected = [
        "webhook Webhook charge.dispute.created",
        "dispute Dispute recorded from the provider",
        "packet Packet version 1 prepared: A person decides",
        "evidence Evidence pod:1 admitted",
        "packet Packet version 2 prepared: Contest the dispute",
        "packet Packet version 1 superseded by version 2",
        "edit Packet version 2 edited (summary)",
        "approval Packet version 2 approved",
        "filing Packet version 2 filing started",
        f"readback Readback run {run.public_id} started",
        "filing Packet version 2: the provider answered the filing (answered)",
        f"readback Readback run {run.public_id}: VERIFIED",
        "readback Packet version 2: readback VERIFIED",
        "reminder Deadline reminder (72h before the deadline)",
    ]
    for title in expected:
        assert title in titles, (title, titles)
    positions = [titles.index(t) for t in expected]
    assert positions[:3] == sorted(positions[:3])  # the event, the recording, the first version
    assert titles[-1] == expected[-1]

    by_title = {r["what"]: r for r in rows}
    assert by_title["approval Packet version 2 approved"]["by"] == "ada"
    assert by_title["evidence Evidence pod:1 admitted"]["by"] == "pat"
    links = "".join(r["links"] for r in rows)
    dashboard = "https://dashboard.stripe.com/test"
    assert f'href="{dashboard}/disputes/{dispute.provider_dispute_id}"' in links
    assert f'href="{dashboard}/payments/{dispute.charge_id}"' in links
    file_id = next(iter(Packet.objects.get(pk=packet.pk).filing_files.values()))
    assert f'href="{dashboard}/files/{file_id}"' in links
    assert reverse("admin:verification_verificationrun_change", args=[run.pk]) in links
    assert reverse("admin:disputes_packet_review", args=[packet.pk]) in links
    assert reverse("admin:receipts_receipt_change", args=[quote(packet.receipt_ids[0])]) in links
    escalation = Escalation.objects.get(subject_type="dispute", subject_id=dispute.public_id)
    assert reverse("admin:verification_escalation_change", args=[escalation.pk]) in links
    event_row = by_title["webhook Webhook charge.dispute.created"]
    assert f"{dashboard}/events/evt_" in event_row["links"]
