"""Issue 41 item 5, the verification pages: the escalation queue and page, the resolve page and
the run list and page say verdicts, classes, subjects, contracts, channels and attempts in a
person's words. The codes (`CONTRADICTED`, `charge_mismatch`, `refund_leg`,
`stripe.refund.created`, `refund_readback`) stay only in a quiet "details" line."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from tests.verification.test_admin import (  # noqa: F401 (fixtures)
    escalation,
    make_run,
    make_staff,
    resolver,
    run,
    viewer,
)
from verification.models import Escalation, Verdict, VerificationRun

# Elements whose text is not prose a person reads as a sentence: details lines, JSON, scripts.
SKIPPED = {"script", "style", "pre", "title"}
VOID = {"br", "img", "input", "meta", "link", "hr", "wbr", "col", "area", "base", "source"}


class _Prose(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []  # per open element: is it (inside) a skipped element
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        hidden = bool(self.stack and self.stack[-1])
        self.stack.append(hidden or tag in SKIPPED or "vouch-quiet" in classes)

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not (self.stack and self.stack[-1]):
            self.words.append(data)


def prose(html: str) -> str:
    """What a person reads on a page, details lines (`.vouch-quiet`) and JSON left out."""
    parser = _Prose()
    parser.feed(html)
    return " ".join(" ".join(parser.words).split())


def details(html: str) -> str:
    """Everything, details lines included (the codes must still be there)."""
    return html


def assert_no_codes(text: str, *codes: str) -> None:
    found = [code for code in codes if code in text]
    where = [text[max(0, text.index(c) - 150) : text.index(c) + 60] for c in found]
    assert not found, (found, where)


@pytest.fixture
def reconciliation_escalation(db: None) -> Escalation:
    """An escalation a reconciliation run opened: no run, a funding leg, a discrepancy's class."""
    return Escalation.objects.create(
        subject_type="funding_leg",
        subject_id="fnd_0123456789abcdef01234567",
        money=True,
        verdict=Verdict.UNVERIFIABLE,
        verdict_class="charge_mismatch",
        reason="Stripe shows a different amount for the charge than the funding leg records.",
    )


def test_escalation_queue_and_page_in_words(
    client: Client,
    viewer: User,  # noqa: F811
    escalation: Escalation,  # noqa: F811
    reconciliation_escalation: Escalation,
) -> None:
    client.force_login(viewer)

    queue = client.get(reverse("admin:verification_escalation_changelist")).content.decode()
    page = client.get(
        reverse("admin:verification_escalation_change", args=[reconciliation_escalation.pk])
    ).content.decode()

    for html in (queue, page):
        words = prose(html)
        assert "Could not be verified" in words
        assert "Could not be verified: charge and funding leg differ" in words
        assert "funding leg" in words
        assert "Contradicted by the provider" in queue
        assert_no_codes(words, "UNVERIFIABLE", "CONTRADICTED", "charge_mismatch", "funding_leg")
        # The codes stay, as details.
        assert "charge_mismatch" in html
        assert "UNVERIFIABLE" in html


def test_resolve_page_and_its_message_in_words(
    client: Client,
    resolver: User,  # noqa: F811
    escalation: Escalation,  # noqa: F811
) -> None:
    client.force_login(resolver)
    url = reverse("admin:verification_escalation_resolve", args=[escalation.pk])

    page = client.get(url).content.decode()
    done = client.post(url, {"note": "Checked in the Dashboard."}, follow=True)

    words = prose(page)
    assert "Contradicted by the provider: wrong amount" in words
    assert "Stripe holds the refund for the charge" in words
    assert_no_codes(words, "CONTRADICTED", "stripe.refund.created")
    said = [str(m) for m in done.context["messages"]]
    assert said == [f"Escalation #{escalation.pk} on run {escalation.run.public_id} is resolved."]
    assert "CONTRADICTED" not in said[0]


def test_run_list_and_page_in_words(
    client: Client,
    viewer: User,  # noqa: F811
    run: VerificationRun,  # noqa: F811
) -> None:
    client.force_login(viewer)

    listed = client.get(reverse("admin:verification_verificationrun_changelist")).content.decode()
    page = client.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()

    listed_words = prose(listed)
    assert "Contradicted by the provider" in listed_words
    assert "Stripe holds the refund for the charge" in listed_words
    assert_no_codes(listed_words, "CONTRADICTED", "stripe.refund.created")

    words = prose(page)
    # The verdict, the attempts and the conditions' results in words.
    assert "Contradicted by the provider" in words
    assert "Attempt #1 (scheduled check)" in words
    assert "Attempt on a provider event" in words
    assert "✗ holds" in words
    assert "? unknown" in words
    # Channels in words, the contract by its title.
    assert "Refund readback" in words
    assert_no_codes(
        words,
        "CONTRADICTED",
        "PENDING",
        "(poll)",
        "Event-triggered",
        "refund_readback",
        "refund_created_events",
        "refund_amount_mismatch",
        "stripe.refund.created",
        "✗ true",
    )
    # ... and the codes are still on the page, as details.
    for code in (
        "CONTRADICTED",
        "refund_readback",
        "refund_amount_mismatch",
        "stripe.refund.created",
    ):
        assert code in page
