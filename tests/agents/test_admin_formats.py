"""A refund request's admin page reads its amount as dollars, not `Amount micro: 2000000`, and
links its envelope (issue 27, item 4)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from agents.models import RefundRequest
from envelopes.models import Envelope
from tests.agents.test_oauth_admin import ops  # noqa: F401 - the ops member's client

pytestmark = pytest.mark.django_db


def test_a_refund_requests_page_reads_dollars_and_links_its_envelope(
    ops: Client,  # noqa: F811
) -> None:
    buyer = User.objects.create_user("bea", "bea@example.com", "pw-bea-123")
    envelope = Envelope.objects.create(owner=buyer)
    request = RefundRequest.objects.create(
        owner=buyer,
        envelope=envelope,
        amount_micro=2_000_000,
        preview={},
        expires_at=timezone.now() + timedelta(minutes=15),
    )

    html = ops.get(reverse("admin:agents_refundrequest_change", args=[request.pk])).content
    page = html.decode()

    assert "Amount micro" not in page
    assert 'title="2,000,000 micro-dollars">$2.00<' in page
    envelope_page = reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    assert f'href="{envelope_page}">{envelope.public_id}</a>' in page
