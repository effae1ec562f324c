"""The dispute pages read money as dollars (the micro-dollars one hover away and beside) and link
the receipts a packet consulted (issue 27, item 4)."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from disputes.models import Packet
from tests.disputes.test_admin import client_for, page
from tests.drivers.disputes import Ops, World, contest_ready

pytestmark = pytest.mark.django_db


@pytest.fixture
def packet(world: World, ops: Ops) -> Packet:
    return contest_ready(world, ops)


def test_the_review_page_reads_dollars_and_links_the_receipts_consulted(
    packet: Packet, ops: Ops
) -> None:
    html = page(client_for(ops.approver), packet)
    amount = packet.dispute.amount_micro

    overview = html[html.index('id="packet-overview"') : html.index('id="packet-posture"')]
    assert f'title="{amount:,} micro-dollars">' in overview
    assert f"{amount:,} micro (" not in overview
    consulted = html[html.index("Receipts consulted") :]
    consulted = consulted[: consulted.index("</tr>")]
    receipt_id = packet.receipt_ids[0]
    assert f'href="/admin/receipts/receipt/{quote(receipt_id)}/change/">{receipt_id}</a>' in (
        consulted
    )


def test_the_dispute_page_reads_dollars_first(packet: Packet, ops: Ops) -> None:
    dispute = packet.dispute
    html = (
        client_for(ops.approver)
        .get(reverse("admin:disputes_dispute_change", args=[dispute.pk]))
        .content.decode()
    )
    assert f'title="{dispute.amount_micro:,} micro-dollars">$' in html
