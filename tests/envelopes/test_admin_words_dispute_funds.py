"""Issue 41 item 5, the dispute funds admin: the list and a dispute's funds page say the status,
Stripe's dispute status, the journal's kinds and notes, the provider read's purpose and the
escalation's status in a person's words; the codes (`needs_response`, `hold`, `dispute.funds`,
`funds withdrawn (webhook)`) stay only in a quiet "details" line."""

from __future__ import annotations

import pytest

from envelopes.selectors import dispute_funds_of
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.test_issue37_surfaces import DOLLAR, _staff, chargeback
from tests.verification.test_admin_words_pages import assert_no_codes, prose

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_dispute_funds_pages_in_words(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    _, _, dispute_id = chargeback(alice, stripe_at_sandbox, 30 * DOLLAR)
    funds = dispute_funds_of(dispute_id)
    assert funds is not None
    olga = _staff("view_envelope", "view_disputefunds")

    listing = olga.get("/admin/envelopes/disputefunds/").content.decode()
    said = prose(listing)
    assert "Held: Stripe withdrew the funds" in said
    assert "at Stripe: a response is due" in said
    assert_no_codes(said, "needs_response", '"held"')
    assert "needs_response" in listing  # as details

    page = olga.get(f"/admin/envelopes/disputefunds/{funds.pk}/change/").content.decode()
    said = prose(page)
    assert "Held by a dispute" in said  # the journal entry's kind
    assert f"Stripe withdrew the disputed money (dispute {dispute_id})" in said
    assert "The dispute's money at Stripe" in said  # why the provider was read
    assert "A response is due" in said
    assert_no_codes(said, "needs_response", "funds withdrawn (", "dispute.funds", "(held)")
    for code in ("needs_response", "hold", "dispute.funds", "funds withdrawn ("):
        assert code in page  # as details
