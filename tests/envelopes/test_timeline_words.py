"""Issue 41 item 5, the envelope's timeline and journal: each entry's title says what happened in
a person's words (Stripe's answer and its reason, the verdict, the journal kind, the check that
ran); the codes (`charge_disputed`, `VERIFIED`, `poll`, `fund`, `refund.created`) stay only in a
quiet "details" line, and the journal's notes written by services read as sentences."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from envelopes.models import Envelope
from envelopes.selectors import envelope_timeline
from tests.envelopes.test_admin import envelope, superuser  # noqa: F401 (fixtures)
from tests.verification.test_admin_words_pages import assert_no_codes, prose
from verification.models import VerificationRun

pytestmark = pytest.mark.django_db

CODES = (
    "charge_disputed",
    "VERIFIED",
    "PENDING",
    "(poll)",
    "refund.created",
    "succeeded",
    "refused:",
)


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(f'id="{start}"') : html.index(f'id="{end}"')]


def test_the_timeline_and_the_journal_in_words(
    superuser: Client,  # noqa: F811
    envelope: Envelope,  # noqa: F811
) -> None:
    # The leg's run the fixture marked VERIFIED, decided: the timeline shows its verdict.
    VerificationRun.objects.filter(verdict="VERIFIED").update(decided_at=timezone.now())
    html = superuser.get(
        reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    ).content.decode()

    timeline = _section(html, "envelope-timeline", "envelope-balances")
    words = prose(timeline)
    assert "Refused by Stripe: the payment is disputed" in words
    assert "Accepted by Stripe" in words
    assert "Verdict: verified" in words
    assert "Journal: funding" in words
    assert "Journal: set aside for a refund" in words
    assert_no_codes(words, *CODES)
    assert not re.search(r"Journal: (fund|reserve|accept)\b", words)
    for code in ("charge_disputed", "VERIFIED", "fund"):
        assert code in timeline  # as details

    journal = html[html.index('id="envelope-journal"') :]
    said = prose(journal)
    assert "Released: Stripe refused the refund" in said
    assert_no_codes(said, "charge_disputed", "refused:")
    assert "refused: charge_disputed" in journal  # the note as written, as details


def test_every_timeline_title_is_words(envelope: Envelope) -> None:  # noqa: F811
    for item in envelope_timeline(envelope):
        assert_no_codes(item.title, *CODES)


def test_service_notes_in_words() -> None:
    from envelopes.selectors.words import journal_note_words

    assert journal_note_words("refused: charge_disputed") == (
        "Released: Stripe refused the refund (the payment is disputed, and Stripe says it can no "
        "longer be refunded)",
        "refused: charge_disputed",
    )
    assert journal_note_words("dispute dp_1: funds withdrawn (webhook)")[0] == (
        "Stripe withdrew the disputed money (dispute dp_1)"
    )
    assert journal_note_words("a person's own words") == ("a person's own words", "")
