"""No correction against the provider's word (issue 24, items 1-4; SPEC §2, §15.4). Every
adjustment that moves money reads the provider when it is proposed and again when it is approved,
stores each read (the answers' bytes and their SHA-256), cites the approval's read on the journal
entry it writes, and is refused — with a code that says what the provider shows — when the
provider contradicts it. A foreign refund recorded by adjustment that the provider later shows
failed or canceled is given back once, through the one release service."""

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.utils import timezone

from accounts.models import User
from envelopes import services
from envelopes.adjustments import adjustment_approve, adjustment_propose
from envelopes.models import (
    Adjustment,
    AdjustmentStatus,
    Envelope,
    FundingLeg,
    JournalEntry,
)
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from verification.services import provider_event_process, provider_event_store

from .conftest import Api

pytestmark = pytest.mark.django_db

LATER = timedelta(hours=25)  # past the provider's 24 h key life


def _person(username: str, *perms: str) -> User:
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-123-abc", is_staff=True
    )
    user.groups.add(Group.objects.get_or_create(name="ops")[0])
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return User.objects.get(pk=user.pk)  # a fresh permission cache


@pytest.fixture
def proposer(db: None) -> User:
    return _person("pia", "envelopes.add_adjustment", "verification.resolve_escalation")


@pytest.fixture
def approver(db: None) -> User:
    return _person(
        "aron",
        "reconciliation.approve_adjustment",
        "envelopes.add_adjustment",
        "verification.resolve_escalation",
    )


@contextmanager
def later() -> Iterator[None]:
    """A day and an hour on, for Vouch and the in-process sandbox alike."""
    with time_machine.travel(timezone.now() + LATER, tick=True):
        yield


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)


def _balances(envelope_id: str) -> tuple[int, int, int]:
    envelope = Envelope.objects.get(public_id=envelope_id)
    return envelope.total_refunded_micro, envelope.reserved_micro, envelope.unspent_micro


# --- item 4: a recorded foreign refund that fails later is given back, once ------------------


def _recorded_foreign_refund(
    alice: Api, sdk: stripe.StripeClient, proposer: User, approver: User
) -> tuple[str, FundingLeg, str, Adjustment]:
    """A $5 envelope, and a 50-cent refund made in the Dashboard, recorded by an adjustment."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    funding = FundingLeg.objects.get()
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 50})
    adjustment = adjustment_propose(
        actor=proposer,
        kind="foreign_refund",
        reason="A refund of 50 cents was made in the Dashboard.",
        funding_leg=funding,
        provider_object_id=foreign.id,
    )
    applied = adjustment_approve(
        adjustment=adjustment, actor=approver, confirmed_amount_micro=500_000
    )
    assert applied.status == AdjustmentStatus.APPLIED
    assert _balances(envelope_id) == (500_000, 0, 4_500_000)
    return envelope_id, funding, foreign.id, applied


def _assert_given_back_once(envelope_id: str, funding: FundingLeg, adjustment: Adjustment) -> None:
    assert _balances(envelope_id) == (0, 0, 5_000_000)
    funding.refresh_from_db()
    assert funding.refunded_micro == 0
    releases = JournalEntry.objects.filter(kind="release", adjustment=adjustment)
    assert [(e.refunded_delta, e.unspent_delta) for e in releases] == [(-500_000, 500_000)]
    assert ledger_breaches() == []


def test_a_recorded_foreign_refund_that_fails_later_is_given_back_by_its_webhook(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed", "lost_or_stolen_card")
    for event_type in ("refund.failed", "refund.updated", "charge.refund.updated"):
        for event in sdk.v1.events.list(params={"type": event_type}).data:
            _deliver(event.to_dict())  # three events of one failure, and each one twice
            _deliver({**event.to_dict(), "id": f"{event.id}_again"})
    _assert_given_back_once(envelope_id, funding, adjustment)
    adjustment.refresh_from_db()
    assert adjustment.released_at is not None


def test_a_recorded_foreign_refund_that_fails_later_is_given_back_by_charge_refunded(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    """The refund's own events were lost; the `charge.refunded` re-read is enough."""
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed", "expired_or_canceled_card")
    _deliver(
        {
            "id": "evt_only_charge_refunded",
            "type": "charge.refunded",
            "created": 1,
            "data": {"object": {"id": funding.charge_id, "object": "charge"}},
        }
    )
    _assert_given_back_once(envelope_id, funding, adjustment)


def test_foreign_refund_release_gives_a_failed_recorded_refund_back_once(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    """The service reconciliation calls: given the provider's refund, never calling it."""
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    live = sdk.v1.refunds.retrieve(refund_id).to_dict()
    assert services.foreign_refund_release(provider_refund=live, source="test") is False
    assert _balances(envelope_id) == (500_000, 0, 4_500_000)  # succeeded: nothing to give back
    sandbox.set_refund_status(refund_id, "failed", "lost_or_stolen_card")
    failed = sdk.v1.refunds.retrieve(refund_id).to_dict()
    calls = sandbox.state()["requests"]
    assert services.foreign_refund_release(provider_refund=failed, source="reconciliation")
    assert not services.foreign_refund_release(provider_refund=failed, source="webhook")
    assert sandbox.state()["requests"] == calls  # it never called the provider
    _assert_given_back_once(envelope_id, funding, adjustment)
    unknown = {**failed, "id": "re_nobody_recorded"}
    assert services.foreign_refund_release(provider_refund=unknown, source="test") is False
    entry = JournalEntry.objects.get(kind="release", adjustment=adjustment)
    assert entry.funding_leg_id == funding.pk
    assert "reconciliation" in entry.note
    # The release cites what it acted on: the provider's refund, stored with its SHA-256.
    read = entry.provider_read
    assert read is not None
    assert read.answers.get().answer()["status"] == "failed"


@pytest.mark.django_db(transaction=True)
def test_concurrent_callers_release_a_failed_foreign_refund_once(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed")
    failed = sdk.v1.refunds.retrieve(refund_id).to_dict()
    barrier = threading.Barrier(8)
    results: list[Any] = [None] * 8

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = services.foreign_refund_release(
                provider_refund=failed, source=f"caller {index}"
            )
        except BaseException as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results, key=repr) == [False] * 7 + [True], results
    _assert_given_back_once(envelope_id, funding, adjustment)


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
