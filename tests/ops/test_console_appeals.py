"""The console's disputes awaiting our answer include one awaiting its appeal (SPEC §17): its
deadline is the appeal's, and nobody else will act on it. Only one whose response Vouch filed:
a dispute lost with nothing filed has no appeal Vouch can make (issue 41 item 6)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from disputes.models import Dispute, Packet
from ops.console import disputes_awaiting_response


def dispute(provider_id: str, status: str) -> Dispute:
    return Dispute.objects.create(
        provider_dispute_id=provider_id,
        charge_id=f"ch_{provider_id}",
        amount_micro=10_000_000,
        reason="fraudulent",
        source="provider",
        provider_status=status,
        response_deadline=timezone.now() + timedelta(days=3),
    )


@pytest.mark.django_db
def test_a_dispute_awaiting_its_appeal_awaits_our_answer() -> None:
    appealed = dispute("dp_appeal", "appeal_needs_response")
    Packet.objects.create(
        dispute=appealed,
        version=1,
        drafter="test",
        posture="contest",
        summary="Delivered.",
        digest="0" * 64,
        status="filed",
    )
    dispute("dp_lost_unfiled", "appeal_needs_response")  # nothing filed: no appeal to make
    dispute("dp_first", "needs_response")
    dispute("dp_appealed", "appeal_under_review")
    dispute("dp_lost", "lost")
    awaiting = set(disputes_awaiting_response().values_list("provider_dispute_id", flat=True))
    assert awaiting == {"dp_appeal", "dp_first"}
