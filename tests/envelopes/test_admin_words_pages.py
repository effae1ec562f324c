"""Issue 41 item 5, the envelope admin pages: an envelope's page, a refund operation's page and
the refund list say refund statuses, leg outcomes, Stripe's refusal, verdicts, funding legs'
states and journal kinds in a person's words. The codes (`partially_refunded`, `charge_disputed`,
`VERIFIED`, `succeeded`) stay only in a quiet "details" line."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from envelopes.models import Envelope, RefundOperation
from tests.envelopes.test_admin import envelope, superuser  # noqa: F401 (fixtures)
from tests.verification.test_admin_words_pages import assert_no_codes, prose

pytestmark = pytest.mark.django_db


def without_timeline(html: str) -> str:
    """The page less its timeline (envelopes.selectors.timeline's titles are not walked yet)."""
    start = html.index('id="envelope-timeline"')
    return html[:start] + html[html.index('id="envelope-balances"') :]


CODES = ("partially_refunded", "charge_disputed", "VERIFIED", "PENDING", "not_applicable")


def test_an_envelope_page_in_words(superuser: Client, envelope: Envelope) -> None:  # noqa: F811
    page = superuser.get(reverse("admin:envelopes_envelope_change", args=[envelope.pk]))

    html = page.content.decode()
    words = prose(without_timeline(html))
    assert "Partly refunded" in words
    assert "Refused by Stripe: the payment is disputed" in words
    assert "Accepted by Stripe" in words
    assert "Verified" in words
    assert "Not decided yet" in words
    assert "Charged" in words  # the funding legs' state
    # Recorded notes (the journal's) keep what the service wrote; the refunds say it in words.
    assert_no_codes(words, *(c for c in CODES if c != "charge_disputed"))
    refunds = html[html.index('id="envelope-refunds"') : html.index('id="envelope-journal"')]
    assert_no_codes(prose(refunds), *CODES)
    for code in ("partially_refunded", "charge_disputed", "VERIFIED", "succeeded"):
        assert code in html  # as details


def test_a_refund_operation_page_and_the_list_in_words(
    superuser: Client,  # noqa: F811
    envelope: Envelope,  # noqa: F811
) -> None:
    operation = RefundOperation.objects.get(envelope=envelope)

    listing = superuser.get(reverse("admin:envelopes_refundoperation_changelist")).content.decode()
    page = superuser.get(
        reverse("admin:envelopes_refundoperation_change", args=[operation.pk])
    ).content.decode()

    listed = prose(listing)
    assert "Partly refunded" in listed
    assert_no_codes(listed, *CODES)
    words = prose(page)
    assert "Refund " + operation.public_id + ": partly refunded" in words
    assert "Refused by Stripe: the payment is disputed" in words
    assert_no_codes(words, *CODES)
