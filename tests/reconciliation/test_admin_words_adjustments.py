"""Issue 41 item 5, the adjustment pages: the propose page and an adjustment's page say the
adjustment's status, the leg's outcome, the escalation's verdict and the journal's kinds in a
person's words; the codes (`proposed`, `applied`, `unknown`, `void`, `UNVERIFIABLE`, `adjust`)
stay only in a quiet "details" line."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from envelopes import services
from envelopes.models import Adjustment
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.reconciliation.test_adjustments_admin import as_, staff
from tests.verification.test_admin_words_pages import assert_no_codes, prose
from verification.models import Escalation

pytestmark = pytest.mark.django_db

VERDICTS = ("UNVERIFIABLE", "CONTRADICTED", "FAILED", "PENDING")


def _codes_left(words: str, *codes: str) -> None:
    assert_no_codes(words, *VERDICTS)
    for code in codes:  # as whole words: `open` is a code, "opened" is not
        assert not re.search(rf"\b{code}\b", words), (code, words[:600])


def test_the_adjustment_pages_in_words(alice: Api, sandbox: SandboxControl) -> None:
    proposer = staff("pia", ("envelopes", "add_adjustment"), ("verification", "resolve_escalation"))
    approver = staff("aron", ("reconciliation", "approve_adjustment"))
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.stranded_resume(older_than_s=60)
        escalation = Escalation.objects.get()
        propose = (
            reverse("admin:reconciliation_adjustment_propose") + f"?escalation={escalation.pk}"
        )
        form = as_(proposer).get(propose).content.decode()
        said = prose(form)
        assert "Stripe's answer not known yet" in said
        _codes_left(said, "unknown")
        assert escalation.verdict in form  # as details

        as_(proposer).post(
            propose, {"kind": "leg_release", "reason": "No refund in the Dashboard."}
        )
        adjustment = Adjustment.objects.get()
        page_url = reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])
        waiting = as_(approver).get(page_url).content.decode()
        said = prose(waiting)
        assert "Waiting for a second person" in said
        assert "Stripe's answer not known yet" in said
        _codes_left(said, "unknown", "open", "leg_release")
        assert "(proposed)" not in said  # the status and the crumb: words, the id
        assert "(details:" in waiting

        decide = reverse("admin:reconciliation_adjustment_decide", args=[adjustment.pk])
        as_(approver).post(decide, {"approve": "1", "confirmed_amount": "$2.00"})
    done = as_(approver).get(page_url).content.decode()
    said = prose(done)
    assert "Approved and written to the journal" in said
    assert "Adjustment #" in said  # the journal entry's kind
    assert "Never made by Stripe" in said  # the leg, void now
    _codes_left(said, "applied", "void", "adjust", "resolved")
    for code in ("applied", "void", "adjust"):
        assert code in done  # as details

    listing = as_(approver).get(reverse("admin:reconciliation_adjustment_changelist"))
    listing = prose(listing.content.decode())
    assert "Approved and written to the journal" in listing
    _codes_left(listing, "applied")
