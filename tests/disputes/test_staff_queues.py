"""Issue 41 items 5 and 6 (the staff's side): the console's dispute queues list only what someone
can act on, the admin lists behind each count call the same selectors, and a page says why
nothing can be done; the review page speaks words, the codes kept in a "details" line."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from disputes import services
from disputes.models import Dispute, Packet
from disputes.selectors import (
    disputes_awaiting_response,
    packets_awaiting_approval,
)
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, approve, contest_ready, file
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    return client


def read_again(sandbox: SandboxControl, dispute: Dispute) -> Dispute:
    """Vouch hears of the dispute's change at the provider (its event)."""
    services.dispute_on_provider_event(
        event={
            "type": "charge.dispute.updated",
            "data": {"object": {"id": dispute.provider_dispute_id}},
        }
    )
    return Dispute.objects.get(pk=dispute.pk)


def tile(page: str, key: str) -> tuple[int, str]:
    match = re.search(
        rf'id="console-{key}" href="([^"]+)" data-count="(\d+)"', page.replace("&amp;", "&")
    )
    assert match, f"no tile {key}"
    return int(match.group(2)), match.group(1)


def listed(client: Client, url: str) -> set[int]:
    response = client.get(url)
    assert response.status_code == 200, url
    return {row.pk for row in response.context["cl"].result_list}


def lost_unfiled_then_appealed(world: World, ops: Ops) -> Packet:
    """A ready response nobody filed; the bank decides against it; the network opens an appeal
    at the sandbox (which Vouch cannot make: nothing was filed)."""
    packet = contest_ready(world, ops)
    sandbox = world.sandbox
    sandbox.set_dispute_status(packet.dispute.provider_dispute_id, "lost")
    sandbox.appeal_dispute(packet.dispute.provider_dispute_id)
    dispute = read_again(sandbox, packet.dispute)
    assert dispute.provider_status == "appeal_needs_response"
    return Packet.objects.get(pk=packet.pk)


def test_a_dispute_lost_with_nothing_filed_then_appealed_is_in_no_queue(
    superuser: Client, world: World, ops: Ops
) -> None:
    packet = lost_unfiled_then_appealed(world, ops)
    assert packet.dispute not in disputes_awaiting_response()
    assert packet not in packets_awaiting_approval()

    page = superuser.get(reverse("admin:index")).content.decode()
    for key, model in (("disputes", "dispute"), ("packets_approval", "packet")):
        count, url = tile(page, key)
        assert count == 0, key
        assert reverse(f"admin:disputes_{model}_changelist") in url
        assert listed(superuser, url) == set(), key

    # Its page says why nothing can be done, and offers no approval.
    review = superuser.get(reverse("admin:disputes_packet_review", args=[packet.pk]))
    text = unescape(review.content.decode())
    assert 'id="act-approve"' not in text
    assert "decided without a response from Vouch" in text
    assert "an appeal can follow only a response Vouch filed" in text


def test_an_appeal_awaiting_its_response_is_in_the_queue_and_the_list_behind_it(
    superuser: Client, world: World, ops: Ops
) -> None:
    response = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    dispute_id = response.dispute.provider_dispute_id
    world.sandbox.set_dispute_status(dispute_id, "lost")
    world.sandbox.appeal_dispute(dispute_id)
    dispute = read_again(world.sandbox, response.dispute)
    assert list(disputes_awaiting_response()) == [dispute]
    page = superuser.get(reverse("admin:index")).content.decode()
    count, url = tile(page, "disputes")
    assert count == 1
    assert listed(superuser, url) == {dispute.pk}


def test_an_incomplete_appeal_offers_no_approve_and_says_what_is_missing(
    world: World, ops: Ops
) -> None:
    response = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    dispute_id = response.dispute.provider_dispute_id
    world.sandbox.set_dispute_status(dispute_id, "lost")
    world.sandbox.appeal_dispute(dispute_id)
    dispute = read_again(world.sandbox, response.dispute)
    appeal = services.appeal_prepare(dispute=dispute, requested_by=ops.preparer)
    assert appeal.status == "incomplete"
    assert appeal not in packets_awaiting_approval()

    approver = Client()
    approver.force_login(ops.approver)
    text = unescape(
        approver.get(reverse("admin:disputes_packet_review", args=[appeal.pk])).content.decode()
    )
    assert 'id="act-approve"' not in text
    note = text.split('id="not-approvable">', 1)[1].split("</p>", 1)[0]
    assert note.startswith("This version is incomplete, so it cannot be approved.")
    assert "No evidence was admitted since the response was filed" in note


def test_the_review_page_speaks_words_and_keeps_codes_as_details(
    superuser: Client, world: World, ops: Ops
) -> None:
    packet = contest_ready(world, ops)
    assert packet.costs.get("break_even")
    text = unescape(
        superuser.get(reverse("admin:disputes_packet_review", args=[packet.pk])).content.decode()
    )
    posture = text.split('id="posture">', 1)[1].split("</span>", 1)[0]
    assert posture == "Contest the dispute"
    reason = text.split('id="dispute-reason">', 1)[1].split("</strong>", 1)[0]
    assert reason == "Product not received"
    break_even = text.split('id="costs-break-even">', 1)[1].split("</td>", 1)[0]
    sentence = r"Contesting pays if you win more than \d+(\.\d)?% of such disputes\."
    assert re.match(sentence, break_even)
    # The fraction stays, as details; never as the figure itself.
    assert f"(details: break-even win rate {packet.costs['break_even']}" in break_even
    assert not re.match(r"\s*0\.\d{6}", break_even)
    status = text.split('id="dispute-provider-status">', 1)[1].split("</span>", 1)[0]
    assert status == "Waiting for our response"
