"""The one automatic correction for a recorded foreign refund (SPEC §15.4; issue 24, item 4),
rule by rule: what it releases and what it refuses, what it stores and cites, and what the audit
trail says. (These kill the mutants of `envelopes.services.foreign_refund_release`.)"""

from typing import Any

import pytest
import stripe

from accounts.models import User
from core.models import AuditEvent
from envelopes import services
from envelopes.models import Adjustment, FundingLeg, JournalEntry
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import person

from .test_adjustments_provider_reads import _balances, _recorded_foreign_refund

pytestmark = pytest.mark.django_db


@pytest.fixture
def proposer(db: None) -> User:
    return person("pia", "envelopes.add_adjustment")


@pytest.fixture
def approver(db: None) -> User:
    return person("aron", "reconciliation.approve_adjustment", "envelopes.add_adjustment")


def _failed(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> tuple[str, FundingLeg, dict[str, Any], Adjustment]:
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed", "lost_or_stolen_card")
    return envelope_id, funding, sdk.v1.refunds.retrieve(refund_id).to_dict(), adjustment


def test_a_failed_refund_shown_with_its_charge_expanded_is_given_back(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, failed, _ = _failed(alice, sandbox, sdk, proposer, approver)
    expanded = {**failed, "charge": {"id": funding.charge_id, "object": "charge"}}
    assert services.foreign_refund_release(provider_refund=expanded, source="test") is True
    assert _balances(envelope_id) == (0, 0, 5_000_000)


def test_a_failed_refund_on_another_charge_is_not_given_back(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, _, failed, adjustment = _failed(alice, sandbox, sdk, proposer, approver)
    for charge in ("ch_someone_else", {"id": "ch_someone_else"}, None):
        moved = {**failed, "charge": charge}
        assert services.foreign_refund_release(provider_refund=moved, source="test") is False
    assert _balances(envelope_id) == (500_000, 0, 4_500_000)
    adjustment.refresh_from_db()
    assert adjustment.released_at is None
    assert not JournalEntry.objects.filter(kind="release").exists()


def test_the_release_stores_what_it_acted_on_and_cites_it(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, failed, adjustment = _failed(alice, sandbox, sdk, proposer, approver)
    source = "reconciliation rec_" + "x" * 300  # a long source: the note is cut at 200
    assert services.foreign_refund_release(provider_refund=failed, source=source) is True

    entry = JournalEntry.objects.get(kind="release", adjustment=adjustment)
    assert entry.note == f"foreign refund {failed['id']} failed ({source})"[:200]
    assert len(entry.note) == 200
    read = entry.provider_read
    assert read is not None
    assert (read.purpose, read.kind, read.subject) == (
        "refund.release",
        "foreign_refund",
        failed["id"],
    )
    assert read.shows == {"refund": failed["id"], "status": "failed"}
    answer = read.answers.get()
    assert answer.request == {"path": f"/v1/refunds/{failed['id']}", "source": source}
    assert answer.answer()["status"] == "failed"

    event = AuditEvent.objects.get(action="adjustment.release")
    assert (event.actor, event.target_type, event.target_id) == (None, "envelope", envelope_id)
    assert event.details == {
        "adjustment": adjustment.public_id,
        "provider_refund": failed["id"],
        "status": "failed",
        "amount_micro": 500_000,
        "source": source,
        "provider_read": read.public_id,
    }
    assert funding.envelope.public_id == envelope_id
