"""The buyer's refund shows its reference at the card network (ARN, issue 41 item 9) with the
sentence on how to use it, at 1366 px and at 390 px, with no serious accessibility violation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from envelopes.models import RefundLeg
from stripe_sandbox.client import SandboxControl
from tests.browser.test_buyer_pages import check, phone, sign_in, window  # noqa: F401
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_buyer_sees_the_reference_for_their_bank(
    window: Page,  # noqa: F811
    phone: Page,  # noqa: F811
    live_server: Any,
    alice: Api,
    sandbox: SandboxControl,
    artifacts: Path,
) -> None:
    sandbox.reference_delay(0)
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    settle_runs()
    leg = RefundLeg.objects.get()
    assert re.fullmatch(r"\d{23}", leg.refund_reference)
    base = live_server.url
    for page in (window, phone):
        sign_in(page, base, "alice", f"/escrow/envelopes/{envelope_id}/")
        page.wait_for_url(f"{base}/escrow/envelopes/{envelope_id}/")
        box = page.locator(f'[data-bank-reference="{leg.public_id}"]')
        expect(box).to_have_attribute("data-reference-status", "available")
        expect(box.locator("[data-arn]")).to_have_text(leg.refund_reference)
        expect(box.locator("[data-how-to-use]")).to_contain_text(
            "Give your bank this reference (ARN) if the refund has not reached your statement "
            "after 10 business days"
        )
        expect(box).to_contain_text("Reference for your bank")
        check(page, artifacts, "refund-reference")
